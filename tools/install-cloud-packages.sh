#!/bin/bash
# Install the Debian packages of the loopback cloud that are missing:
# MariaDB, RabbitMQ, libvirt and QEMU, and what libvirt-python builds with;
# or just the packages named (tox -e bench: mariadb-server).
# None of them is started as a system service.
set -euo pipefail

packages=(mariadb-server rabbitmq-server libvirt-daemon-system
          libvirt-clients qemu-system-x86 qemu-utils libvirt-dev pkg-config
          gcc)
if [ $# -gt 0 ]; then
    packages=("$@")
fi
missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null \
        | grep -q 'ok installed' || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "install as root: apt-get install ${missing[*]}" >&2
        exit 1
    fi
    # The cloud starts them as plain processes: keep the packages from
    # starting system services on install.
    policy=/usr/sbin/policy-rc.d
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' > "$policy"
        chmod +x "$policy"
        trap 'rm -f "$policy"' EXIT
    fi
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
        --no-install-recommends "${missing[@]}"
fi
