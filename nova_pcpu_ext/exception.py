# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Errors that stop a service at startup with a message saying what to fix."""


class PcpuExtError(Exception):
    """Base class: the message is meant for the operator, verbatim."""


class PluginNotFound(PcpuExtError):
    pass


class PluginLoadFailed(PcpuExtError):
    pass


class InvalidConfig(PcpuExtError):
    pass


class IncompatibleNova(PcpuExtError):
    pass


class ServiceError(PcpuExtError):
    """Placement or the Compute API failed or could not be reached."""


class DatabaseError(PcpuExtError):
    """Nova's API database could not be read."""


class NovaDataError(PcpuExtError):
    """Nova's objects could not make sense of what a database holds.

    The database answered; an object of this Nova release failed on what
    it read (a changed object, a value that is not what it should be).
    """


class ActionRefused(PcpuExtError):
    """The Compute API refused to start a server action."""


class NotFound(PcpuExtError):
    """What the operator named on the command line does not exist."""


class ProviderGone(PcpuExtError):
    """A resource provider was deleted while a command read or wrote it.

    Placement answered 404 for it; ``uuid`` names it. Callers skip it.
    """

    def __init__(self, uuid):
        super().__init__('placement: resource provider %s was deleted '
                         'during the run.' % uuid)
        self.uuid = uuid
