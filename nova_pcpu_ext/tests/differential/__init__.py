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

"""Differential scheduling: generated clouds, stock Nova against the
extension, judged by the plugin pages' rules.

:mod:`generator` makes a cloud and a sequence of steps from a seed,
:mod:`runner` runs them on real Nova services and real placement,
:mod:`oracle` compares each variant's outcomes with stock Nova's, and
:mod:`explore` is the command line (``tox -e explore``). See
``doc/source/contributor/differential.rst``.
"""
