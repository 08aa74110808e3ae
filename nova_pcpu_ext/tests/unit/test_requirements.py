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

"""Every third-party import of the package is a declared requirement.

Nova's environment provides most of them today, but what Nova requires
may change between series: the package declares what it imports itself.
Nova is the exception: the package goes into Nova's environment and never
changes its version, so requirements.txt names Nova's range in a comment
and the tests declare it.
"""

import ast
import functools
import glob
from importlib import metadata
import os
import re
import sys

from packaging import requirements

import nova_pcpu_ext
from nova_pcpu_ext import compat
from nova_pcpu_ext.tests.unit import base

PACKAGE = os.path.dirname(os.path.abspath(nova_pcpu_ext.__file__))
ROOT = os.path.dirname(PACKAGE)
TESTS = os.path.join(PACKAGE, 'tests')
#: Test tools with requirements of their own: the loopback cloud
#: (cloud-requirements.txt) and the benchmarks (tox -e bench).
OWN_REQUIREMENTS = ('cloud', 'perf')
#: Provided by the environment the package is installed into.
ENVIRONMENT = {'nova'}


def normalised(name):
    """A distribution name as PEP 503 compares them."""
    return re.sub(r'[-_.]+', '-', name).lower()


def parsed(name):
    """The requirements of a requirements file, comments left out."""
    with open(os.path.join(ROOT, name)) as lines:
        return [requirements.Requirement(line.partition('#')[0])
                for line in lines if line.partition('#')[0].strip()]


def declared(*files):
    """The normalised names of the distributions ``files`` require."""
    return {normalised(requirement.name) for name in files
            for requirement in parsed(name)}


def pins(path):
    """``{normalised name: version}`` of a constraints file."""
    with open(path) as lines:
        return {normalised(name): version for name, version in re.findall(
            r'^([A-Za-z0-9][A-Za-z0-9._-]*)===?([^\s;]+)', lines.read(),
            re.MULTILINE)}


def modules(top, skip=()):
    """Paths of the Python modules under ``top``, without ``skip`` dirs."""
    for path, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs
                         if os.path.join(path, d) not in skip)
        yield from (os.path.join(path, f) for f in sorted(files)
                    if f.endswith('.py'))


def third_party(paths, module_level_only=False):
    """``{top-level import name: first module importing it}``.

    :param module_level_only: leave out imports inside functions, which
        test tools use for optional dependencies (libvirt, matplotlib).
    """
    found = {}
    for path in paths:
        with open(path) as source:
            tree = ast.parse(source.read(), path)
        nodes = tree.body if module_level_only else ast.walk(tree)
        for node in nodes:
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.partition('.')[0]
                if (top not in sys.stdlib_module_names and
                        top != 'nova_pcpu_ext'):
                    found.setdefault(top, os.path.relpath(path, ROOT))
    return found


@functools.lru_cache(maxsize=None)
def declared_top_levels():
    """``{import name: {distribution names}}`` as the metadata declares it."""
    return {name: set(dists) for name, dists in
            metadata.packages_distributions().items()}


@functools.lru_cache(maxsize=None)
def top_levels_from_files():
    """``{import name: {distribution names}}`` from each one's files.

    Python 3.10's ``packages_distributions`` reads only ``top_level.txt``,
    which not every wheel has. Reading every distribution's file list
    takes several seconds, so it is done only for a name not found
    otherwise, once a process.
    """
    found = {}
    for dist in metadata.distributions():
        for path in dist.files or ():
            top = path.parts[0]
            if len(path.parts) == 1 and path.suffix == '.py':
                top = path.stem
            elif len(path.parts) == 1 or top == '..' or '.' in top:
                continue
            found.setdefault(top, set()).add(dist.metadata['Name'])
    return found


def distributions_of(name):
    """The sorted names of the distributions installing import ``name``."""
    return sorted(declared_top_levels().get(name) or
                  top_levels_from_files().get(name, ()))


def undeclared(imports, allowed):
    """``[(import, module, its distributions)]`` not in ``allowed``."""
    return sorted(
        (name, module, distributions_of(name) or ['not installed'])
        for name, module in imports.items()
        if not allowed & {normalised(distribution) for distribution
                          in distributions_of(name)})


class RequirementsTest(base.TestCase):

    def setUp(self):
        super().setUp()
        if not os.path.exists(os.path.join(ROOT, 'requirements.txt')):
            self.skipTest('needs a checkout: requirements.txt is not '
                          'installed with the package')

    def test_every_import_of_the_package_is_declared(self):
        imports = third_party(modules(PACKAGE, skip=(TESTS,)))

        self.assertIn('openstack', imports)  # the walk found something
        self.assertEqual([], undeclared(
            imports, declared('requirements.txt') | ENVIRONMENT))

    def test_every_import_of_the_tests_is_declared(self):
        skip = tuple(os.path.join(TESTS, name) for name in OWN_REQUIREMENTS)
        imports = third_party(modules(TESTS, skip), module_level_only=True)

        self.assertIn('testtools', imports)
        self.assertEqual([], undeclared(imports, declared(
            'requirements.txt', 'test-requirements.txt')))

    def test_nova_is_left_to_the_environment(self):
        self.assertIn('nova', third_party(modules(PACKAGE, skip=(TESTS,))))
        self.assertNotIn('nova', declared('requirements.txt'))
        with open(os.path.join(ROOT, 'requirements.txt')) as text:
            self.assertIn('Nova itself (%d.0.0 to %d.x)' % (
                compat.OLDEST_TESTED, compat.NEWEST_TESTED), text.read())
        with open(os.path.join(ROOT, 'test-requirements.txt')) as text:
            self.assertIn('nova>=%d.0.0' % compat.OLDEST_TESTED,
                          text.read().split())

    def test_every_supported_series_satisfies_the_floors(self):
        # NOTE: constraints.txt is the newest series'; the others are named
        # after theirs. A requirement a series does not pin is not checked.
        series = sorted(glob.glob(os.path.join(ROOT, 'constraints',
                                               'nova-*.txt')))
        series.append(os.path.join(ROOT, 'constraints.txt'))
        unmet = [(os.path.basename(path), str(requirement), version)
                 for path in series for pinned in [pins(path)]
                 for requirement in (parsed('requirements.txt') +
                                     parsed('test-requirements.txt'))
                 for version in [pinned.get(normalised(requirement.name))]
                 if version and not requirement.specifier.contains(
                     version, prereleases=True)]

        self.assertGreaterEqual(len(series), 5)
        self.assertEqual([], unmet)

    def test_undeclared_names_the_import_and_its_distribution(self):
        self.assertEqual(
            [('yaml', 'x.py', ['PyYAML'])],
            undeclared({'yaml': 'x.py', 'testtools': 'y.py'},
                       {'testtools', 'other'}))
