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

"""Minimal stand-ins for devstack's ini functions, for the plugin test.

``python -m nova_pcpu_ext.tests.devstack_ini OP FILE SECTION
OPTION [VALUE...]`` with OP one of set, add, get, set_multi, delete; like
devstack's, they edit the file line by line and keep repeated options.
"""

import re
import sys


def _read(path):
    try:
        with open(path) as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []


def _section_bounds(lines, section):
    """(index after the header, index of the next header) or None."""
    start = None
    for i, line in enumerate(lines):
        if re.match(r'^\s*\[.*\]\s*$', line):
            if start is not None:
                return start, i
            if line.strip() == '[%s]' % section:
                start = i + 1
    return (start, len(lines)) if start is not None else None


def _is_option(line, option):
    return re.match(r'^\s*%s\s*=' % re.escape(option), line) is not None


def values(lines, section, option):
    bounds = _section_bounds(lines, section)
    if not bounds:
        return []
    return [line.split('=', 1)[1].strip()
            for line in lines[bounds[0]:bounds[1]] if _is_option(line, option)]


def delete(lines, section, option):
    bounds = _section_bounds(lines, section)
    if not bounds:
        return lines
    start, end = bounds
    return lines[:start] + [line for line in lines[start:end]
                            if not _is_option(line, option)] + lines[end:]


def add(lines, section, option, *new_values):
    bounds = _section_bounds(lines, section)
    if not bounds:
        lines = lines + ['[%s]' % section]
        bounds = (len(lines), len(lines))
    end = bounds[1]
    while end > bounds[0] and not lines[end - 1].strip():
        end -= 1
    added = ['%s = %s' % (option, value) for value in new_values]
    return lines[:end] + added + lines[end:]


def main(op, path, section, option, *args):
    lines = _read(path)
    if op == 'get':
        print(' '.join(values(lines, section, option)))
        return
    if op in ('set', 'set_multi', 'delete'):
        lines = delete(lines, section, option)
    if op == 'set':
        lines = add(lines, section, option, ' '.join(args))
    elif op in ('add', 'set_multi'):
        lines = add(lines, section, option, *args)
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')


if __name__ == '__main__':
    main(*sys.argv[1:])
