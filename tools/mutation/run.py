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

"""Mutation testing of the plugins' modules with cosmic-ray.

For each module of ``modules.toml``, in a copy of the tree (cosmic-ray
edits the module in place while a mutant runs, so never in the
checkout):

1. cosmic-ray runs the module's unit tests against every mutant;
2. each mutant they leave alive runs against the functional tests that
   cover the module;
3. a mutant still alive is either listed in ``equivalent.yaml`` (with
   why it cannot change behaviour) or counted as a gap in the tests.

With ``--recheck``, the survivors of the unit tests run against the unit
tests as they are now, once tests have been added for them.

Sessions (cosmic-ray's sqlite files, ``cr-report`` reads them) and the
report go to ``.mutation/`` of the checkout. Usage::

    tox -e mutation -- [--resume] [--unit-only] [MODULE ...]
"""

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import time

from cosmic_ray import mutating
from cosmic_ray import work_db
from cosmic_ray import work_item
import toml
import yaml

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
IGNORED = ('.git', '.tox', '.stestr', '.mutation', '.cloud', '.venv',
           'build', 'dist', 'doc', 'releasenotes', 'bench-results',
           '__pycache__', '*.egg-info')
SURVIVED = work_item.TestOutcome.SURVIVED


def load_modules():
    return toml.loads((HERE / 'modules.toml').read_text())


def key(name, item):
    mutation = item.mutations[0]
    return name, mutation.operator_name, mutation.occurrence


def load_equivalents():
    path = HERE / 'equivalent.yaml'
    entries = yaml.safe_load(path.read_text()) if path.exists() else None
    return {(e['module'], e['operator'], int(e['occurrence'])): e
            for e in entries or ()}


def copy_tree(work_dir):
    """A fresh copy of the checkout: no mutant of a killed run stays."""
    if work_dir.exists():
        shutil.rmtree(work_dir)
    shutil.copytree(ROOT, work_dir, symlinks=True,
                    ignore=shutil.ignore_patterns(*IGNORED))


def check_copy_imported(work_dir):
    """The tests must import the copy, not the checkout (editable)."""
    where = subprocess.run(
        [sys.executable, '-c',
         'import nova_pcpu_ext; print(nova_pcpu_ext.__file__)'],
        check=True, capture_output=True, text=True).stdout.strip()
    if not pathlib.Path(where).is_relative_to(work_dir):
        sys.exit('nova_pcpu_ext is imported from %s, not from the copy %s'
                 % (where, work_dir))


def test_command(kind, modules):
    return ' '.join([sys.executable, '-m', 'testtools.run', '--failfast'] +
                    ['nova_pcpu_ext.tests.%s.%s' % (kind, m)
                     for m in modules])


def baseline(command):
    """Seconds the tests take on the unmutated tree; they must pass."""
    start = time.monotonic()
    proc = subprocess.run(command.split(), capture_output=True, text=True)
    if proc.returncode:
        sys.exit('The tests fail without any mutant: %s\n%s%s'
                 % (command, proc.stdout[-3000:], proc.stderr[-3000:]))
    return time.monotonic() - start


def cosmic_ray(*args):
    command = pathlib.Path(sys.executable).parent / 'cosmic-ray'
    subprocess.run([str(command)] + list(args), check=True)


def unit_phase(name, spec, sessions, resume):
    session = sessions / ('%s.sqlite' % name)
    config = sessions / ('%s.toml' % name)
    command = test_command('unit', spec['unit'])
    if not (resume and session.exists()):
        seconds = baseline(command)
        config.write_text(toml.dumps({'cosmic-ray': {
            'module-path': spec['path'],
            'timeout': max(60.0, round(10 * seconds)),
            'excluded-modules': [],
            'test-command': command,
            'distributor': {'name': 'local'},
        }}))
        cosmic_ray('init', str(config), str(session))
        for later in ('functional', 'recheck'):
            stale = sessions / ('%s.%s.sqlite' % (name, later))
            if stale.exists():
                stale.unlink()
    cosmic_ray('exec', str(config), str(session))
    return session


def survivors(session):
    with work_db.use_db(str(session), work_db.WorkDB.Mode.open) as db:
        items = {i.job_id: i for i in db.work_items}
        return [items[job] for job, result in db.results
                if result.test_outcome == SURVIVED]


def rerun(name, kind, modules, earlier, session, resume, skip=()):
    """The survivors of an earlier session against other tests."""
    if session.exists() and not resume:
        session.unlink()
    alive = [i for i in survivors(earlier) if key(name, i) not in skip]
    with work_db.use_db(str(session)) as db:
        done = {job for job, _result in db.results}
        known = {i.job_id for i in db.work_items}
        db.add_work_items(i for i in alive if i.job_id not in known)
        pending = [i for i in alive if i.job_id not in done]
        if not pending:
            return session
        command = test_command(kind, modules)
        timeout = max(300.0, 3 * baseline(command))
        for item in pending:
            print('%s: %s %s #%d' % (
                kind, name, item.mutations[0].operator_name,
                item.mutations[0].occurrence), flush=True)
            db.set_result(item.job_id, mutating.mutate_and_test(
                item.mutations, command, timeout))
    return session


def functional_phase(name, spec, sessions, unit_session, resume):
    """Each survivor of the unit tests against the functional tests.

    Not the mutants listed as equivalent: a whole functional run each,
    for nothing.
    """
    return rerun(name, 'functional', spec['functional'], unit_session,
                 sessions / ('%s.functional.sqlite' % name), resume,
                 skip=load_equivalents())


def recheck_phase(name, spec, sessions, resume):
    """The unit tests' survivors against the unit tests as they are now.

    After tests are added for surviving mutants: quicker than a whole run,
    which gives the same count when the tests kill them.
    """
    return rerun(name, 'unit', spec['unit'], sessions / ('%s.sqlite' % name),
                 sessions / ('%s.recheck.sqlite' % name), resume)


def counts(session):
    if not session.exists():
        return 0, []
    with work_db.use_db(str(session), work_db.WorkDB.Mode.open) as db:
        items = {i.job_id: i for i in db.work_items}
        results = [(items[job], r) for job, r in db.results
                   if r.worker_outcome != work_item.WorkerOutcome.NO_TEST]
    alive = [(i, r) for i, r in results if r.test_outcome == SURVIVED]
    return len(results), alive


def rechecked_killed(session):
    if not session.exists():
        return set()
    with work_db.use_db(str(session), work_db.WorkDB.Mode.open) as db:
        return {job for job, result in db.results
                if result.test_outcome != SURVIVED and
                result.worker_outcome != work_item.WorkerOutcome.NO_TEST}


def not_run(session):
    with work_db.use_db(str(session), work_db.WorkDB.Mode.open) as db:
        return db.num_work_items - db.num_results


def report(names, sessions):
    equivalents = load_equivalents()
    lines = ['%-18s %8s %8s %8s %8s %6s %6s %7s' % (
        'module', 'mutants', 'unit', 'func.', 'recheck', 'equiv.', 'gaps',
        'rate')]
    details = []
    notes = []
    for name in names:
        total, unit_alive = counts(sessions / ('%s.sqlite' % name))
        if not total:
            continue
        pending = not_run(sessions / ('%s.sqlite' % name))
        if pending:
            notes.append('%s: %d mutants not run yet (--resume goes on)'
                         % (name, pending))
        func_total, alive = counts(sessions / ('%s.functional.sqlite' % name))
        # Listed equivalents do not run against the functional tests.
        listed = [(i, r) for i, r in unit_alive
                  if key(name, i) in equivalents]
        alive = [a for a in alive if a not in listed] + listed
        functional = '%7.1f%%' % (100.0 * (total - len(alive)) / total)
        if func_total < len(unit_alive) - len(listed):
            alive = unit_alive  # the functional phase did not run
            functional = '%8s' % '-'
        # A mutant the unit tests as they are now kill (--recheck) is
        # killed; one not rechecked stays as it was.
        killed_now = rechecked_killed(sessions / ('%s.recheck.sqlite' % name))
        alive = [(i, r) for i, r in alive if i.job_id not in killed_now]
        equivalent = [(i, r) for i, r in alive if key(name, i) in equivalents]
        gaps = [a for a in alive if a not in equivalent]
        killed = total - len(alive)
        lines.append('%-18s %8d %7.1f%% %s %7.1f%% %6d %6d %6.1f%%' % (
            name, total, 100.0 * (total - len(unit_alive)) / total,
            functional,
            100.0 * killed / total, len(equivalent), len(gaps),
            100.0 * killed / max(1, total - len(equivalent))))
        for item, result in gaps:
            mutation = item.mutations[0]
            details.append('%s %s #%d line %d\n%s' % (
                name, mutation.operator_name, mutation.occurrence,
                mutation.start_pos[0], result.diff))
    text = '\n'.join(lines)
    text += ('\n\nunit, func., recheck: mutants killed by the unit tests, '
             'then also by the functional\ntests, then also by the unit '
             'tests as they are now (--recheck); rate: killed /\n(mutants - '
             'equivalent)\n')
    text += ''.join('\n' + note for note in notes)
    if details:
        text += '\nSurviving mutants not listed as equivalent:\n\n'
        text += '\n'.join(details)
    (sessions / 'report.txt').write_text(text)
    print(text)


def main():
    modules = load_modules()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('modules', nargs='*', metavar='MODULE',
                        help='default: all, in the order of modules.toml: '
                        '%s' % ', '.join(modules))
    parser.add_argument('--work-dir', type=pathlib.Path, required=True,
                        help='where the tree is copied and mutated')
    parser.add_argument('--resume', action='store_true',
                        help='go on with the sessions of an earlier run')
    parser.add_argument('--unit-only', action='store_true')
    parser.add_argument('--recheck', action='store_true',
                        help='only run the survivors of the last run '
                        'against the unit tests as they are now')
    parser.add_argument('--report-only', action='store_true')
    args = parser.parse_args()
    names = args.modules or list(modules)
    unknown = set(names) - set(modules)
    if unknown:
        parser.error('unknown modules: %s' % ', '.join(sorted(unknown)))
    sessions = ROOT / '.mutation'
    sessions.mkdir(exist_ok=True)
    if not args.report_only:
        work_dir = args.work_dir.resolve()
        copy_tree(work_dir)
        os.chdir(work_dir)
        os.environ['PYTHONPATH'] = str(work_dir)
        # NOTE: no bytecode of the copy: a mutant of the same size written
        # within the second of a cached module would not be recompiled.
        os.environ['PYTHONDONTWRITEBYTECODE'] = '1'
        check_copy_imported(work_dir)
        for name in names:
            if args.recheck:
                recheck_phase(name, modules[name], sessions, args.resume)
                continue
            unit = unit_phase(name, modules[name], sessions, args.resume)
            if not args.unit_only:
                functional_phase(name, modules[name], sessions, unit,
                                 args.resume)
    report(names, sessions)


if __name__ == '__main__':
    main()
