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

"""The service logs as evidence: errors not in the allowlist, and the
extension's activation lines."""

import fnmatch
import os
import re
import time

import yaml

ALLOWLIST = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                         'log-allowlist.yaml')
# oslo.log's prefix: date time pid level logger, then the record's context
# ("[-]", "[req-... ...]"). The lines of a logged traceback repeat the
# prefix, with level ERROR whatever the record's level, and no context; a
# remote error's traceback comes as one line holding its list of lines.
OSLO_PREFIX = re.compile(
    r"^(\S+ \S+ \d+) ([A-Z]+) (\S+)( \[(?!instance: |'))?")
ERROR = re.compile(r'\bERROR\b|\[error\]|Traceback \(most recent call last\)')
# Logged by activation.patch() for every Nova class or function replaced.
ACTIVATION = re.compile(r'nova-pcpu-ext: \S+ replaced')
# Logged by the serialized report client when a compute status change
# goes ahead without a tree lock ([pcpu_ext] provider_lock_timeout), before
# its first update without the lock.
LOCK_TIMEOUT = re.compile(r'goes ahead without the lock')
# The prefixes of the deployments' processes and logs; others are shared.
DEPLOYMENTS = ('stock', 'ext')


def load_allowlist():
    with open(ALLOWLIST) as f:
        entries = yaml.safe_load(f) or []
    for entry in entries:
        if not entry.get('reason'):
            raise ValueError('log allowlist entry without a reason: %s' %
                             entry)
        entry['regex'] = re.compile(entry['pattern'])
        if isinstance(entry.get('during'), str):
            entry['during'] = [entry['during']]
    return entries


def records(lines):
    """The log's records: each a line with the lines that belong to it.

    Those are the lines of its traceback (its oslo.log prefix, level the
    same or ERROR, no context), lines without a prefix after an oslo.log
    line, or the indented lines of a bare traceback. Two records of one
    process and logger in the same millisecond stay two.
    """
    record, head = [], None  # head: (date time pid, level, logger)
    for line in lines:
        match = OSLO_PREFIX.match(line)
        if match:
            date, level, logger, context = match.groups()
            continues = not context and head is not None and (
                date, logger) == (head[0], head[2]) and level in (
                    head[1], 'ERROR')
        else:
            continues = record and (head is not None or line[:1].isspace()
                                    or record[-1][:1].isspace())
        if record and not continues:
            yield ''.join(record)
            record = []
        if not record:
            head = match.groups()[:3] if match else None
        record.append(line)
    if record:
        yield ''.join(record)


def is_error(record):
    levels = {m.group(2) for m in map(OSLO_PREFIX.match, record.splitlines())
              if m}
    if levels:
        return bool(levels & {'ERROR', 'CRITICAL'})
    return ERROR.search(record) is not None


def unexpected_errors(log_dir, stock_pids=(), stock_windows=(), events=()):
    """Error records no allowlist entry explains, and those it does.

    For the journey, in which the extension deployment runs stock Nova:
    the records of ``stock_pids`` (its processes that ran stock Nova), and
    of its placement within ``stock_windows`` ((start, end) epoch seconds
    in which some of its computes ran stock Nova: placement answers
    theirs), are judged as the stock deployment's. ``events``: (name,
    deployment, start, end or None) of each fault and stop of the run, for
    the entries that excuse a record only ``during`` one. Returns [(log
    name, first line)] and {pattern: count}.
    """
    allowlist = load_allowlist()
    unexpected, allowed = [], {}
    for name in sorted(os.listdir(log_dir)):
        if name.startswith(('tempest-', 'drill-')):
            continue  # test output, or a drill's evidence it judges itself
        with open(os.path.join(log_dir, name), errors='replace') as f:
            for record in records(f):
                if not is_error(record):
                    continue
                judged_as = name
                if _pid(record) in stock_pids or (
                        name == 'ext-placement.log' and any(
                            start <= _time(record) <= end
                            for start, end in stock_windows)):
                    judged_as = 'stock-' + name.partition('-')[2]
                entry = next((e for e in allowlist
                              if fnmatch.fnmatch(judged_as, e['log']) and
                              _excuses(e, record, name, events)), None)
                if entry:
                    allowed[entry['pattern']] = allowed.get(
                        entry['pattern'], 0) + 1
                else:
                    unexpected.append((name, record.splitlines()[0]))
    return unexpected, allowed


def lock_timeouts(log_dir):
    """The events of status updates that went ahead without the tree lock.

    ('lock timeout of compute-HOST', deployment, time, time) for each such
    warning of a compute's log: without the lock, the update may meet a
    concurrent write of the same provider (see the allowlist).
    """
    events = []
    for name in sorted(os.listdir(log_dir)):
        deployment, service = owner(name)
        if not (service.startswith('compute-') and name.endswith('.log')):
            continue
        with open(os.path.join(log_dir, name), errors='replace') as f:
            events += [('lock timeout of ' + service, deployment,
                        _time(record), _time(record))
                       for record in records(f)
                       if LOCK_TIMEOUT.search(record)]
    return events


def owner(name):
    """(deployment, or '*' if shared; service) of a process or log name."""
    service = os.path.splitext(name)[0]
    deployment, _, rest = service.partition('-')
    if deployment in DEPLOYMENTS:
        return deployment, rest
    return '*', service


def _excuses(entry, record, log_name, events):
    """Whether ``entry`` excuses ``record`` of ``log_name``.

    An entry without ``during`` excuses a record it matches at any time;
    one with it, only within an event it names (``own stop``: a stop of the
    service that wrote the record; ``{group}``: the text the pattern's
    named group matched) of the record's deployment or a shared one, up to
    ``within`` seconds after the event ended.
    """
    match = entry['regex'].search(record)
    if not match:
        return False
    if 'during' not in entry:
        return True
    patterns = [p.format(**match.groupdict()) for p in entry['during']]
    return _during(patterns, entry.get('within', 0), log_name,
                   _time(record), events)


def _during(patterns, within, log_name, when, events):
    """Whether an event named by ``patterns`` covers ``when``."""
    if when is None:
        return False
    deployment, service = owner(log_name)
    for event, event_deployment, start, end in events:
        if '*' not in (deployment, event_deployment) and (
                deployment != event_deployment):
            continue
        if when < start or (end is not None and when > end + within):
            continue
        # NOTE: "own stop" for "stop of SERVICE" in SERVICE's log.
        what, of, subject = event.rpartition(' of ')
        names = [event] + (['own ' + what] if of and subject == service
                           else [])
        if any(fnmatch.fnmatch(name, pattern)
               for name in names for pattern in patterns):
            return True
    return False


def _pid(record):
    match = OSLO_PREFIX.match(record)
    return int(match.group(1).split()[2]) if match else None


def _time(record):
    """Epoch seconds of an oslo.log record (local time); None without."""
    match = OSLO_PREFIX.match(record)
    if not match:
        return None
    stamp = ' '.join(match.group(1).split()[:2])
    whole, _, fraction = stamp.partition('.')
    return time.mktime(time.strptime(whole, '%Y-%m-%d %H:%M:%S')) + float(
        '0.' + (fraction or '0'))


def missing_activation(log_dir, names):
    """The logs among ``names`` without the extension's activation lines."""
    missing = []
    for name in names:
        path = os.path.join(log_dir, name)
        try:
            with open(path, errors='replace') as f:
                if ACTIVATION.search(f.read()):
                    continue
        except FileNotFoundError:
            pass
        missing.append(name)
    return missing
