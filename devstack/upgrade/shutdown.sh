#!/bin/bash
# Stop what the nova-pcpu-ext devstack plugin started: nova-compute running
# as nova-pcpu-ext-compute in the devstack@n-cpu unit. grenade shuts the
# projects down in reverse order, so this runs before Nova's shutdown.sh,
# whose check looks for processes named nova-compute only.

set -o errexit

source $GRENADE_DIR/grenaderc
source $GRENADE_DIR/functions

source $BASE_DEVSTACK_DIR/stackrc

set -o xtrace

stop_process n-cpu
ensure_services_stopped nova-pcpu-ext-compute
