#!/bin/bash
# Upgrade nova-pcpu-ext: install the target checkout into Nova's
# environment, write its nova.conf options and restart what loads it.
# grenade runs this after Nova's upgrade.sh, which started nova-scheduler
# and plain nova-compute on the target code.

set -o errexit

source $GRENADE_DIR/grenaderc
source $GRENADE_DIR/functions

source $TARGET_DEVSTACK_DIR/stackrc
source $TARGET_DEVSTACK_DIR/lib/tls
source $TARGET_DEVSTACK_DIR/lib/apache
source $TARGET_DEVSTACK_DIR/lib/nova

# The checkout this script runs from is the target.
NOVA_PCPU_EXT_DIR=$(cd "$(dirname "$0")/../.." && pwd)
source $NOVA_PCPU_EXT_DIR/devstack/settings
# NOTE: sourced for its functions: without a phase argument it runs none.
source $NOVA_PCPU_EXT_DIR/devstack/plugin.sh

set -o xtrace

install_nova_pcpu_ext
configure_nova_pcpu_ext_options "$NOVA_CONF"

restarted=""
if is_service_enabled n-sch; then
    configure_nova_pcpu_ext_scheduler
    stop_process n-sch
    run_process n-sch "$NOVA_BIN_DIR/nova-scheduler --config-file $NOVA_CONF"
    restarted+=" n-sch"
fi
if is_service_enabled n-cpu; then
    start_nova_pcpu_ext_compute
    restarted+=" n-cpu"
fi

# shellcheck disable=SC2086
ensure_services_started $restarted
