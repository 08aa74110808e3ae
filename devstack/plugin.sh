#!/bin/bash
# devstack plugin of nova-pcpu-ext: installs the package into Nova's
# environment, enables the plugins from nova.conf, runs nova-compute as
# nova-pcpu-ext-compute and tells tempest what to expect.

NOVA_PCPU_EXT_ACTIVATE=nova_pcpu_ext.scheduler.activate
# Removed again by clean.
NOVA_PCPU_EXT_OPTIONS="request_filters resource_tracker_mixins report_client
isolate_fallback_mode provider_lock_warn_seconds"

function install_nova_pcpu_ext {
    setup_develop "$NOVA_PCPU_EXT_DIR"
}

# Write the [pcpu_ext] section of a nova configuration file.
function configure_nova_pcpu_ext_options {
    local conf=$1
    iniset "$conf" pcpu_ext request_filters "$NOVA_PCPU_EXT_REQUEST_FILTERS"
    iniset "$conf" pcpu_ext resource_tracker_mixins \
        "$NOVA_PCPU_EXT_RESOURCE_TRACKER_MIXINS"
    iniset "$conf" pcpu_ext report_client "$NOVA_PCPU_EXT_REPORT_CLIENT"
    iniset "$conf" pcpu_ext isolate_fallback_mode \
        "$NOVA_PCPU_EXT_ISOLATE_FALLBACK_MODE"
    iniset "$conf" pcpu_ext provider_lock_warn_seconds \
        "$NOVA_PCPU_EXT_PROVIDER_LOCK_WARN_SECONDS"
}

# Add the activation entry to [filter_scheduler] available_filters, keeping
# every entry already there.
function configure_nova_pcpu_ext_scheduler {
    local existing
    existing=$(iniget_multiline "$NOVA_CONF" filter_scheduler available_filters)
    if [[ -z "$existing" ]]; then
        # Setting the option replaces Nova's default: keep Nova's filters.
        iniadd "$NOVA_CONF" filter_scheduler available_filters \
            nova.scheduler.filters.all_filters
    fi
    if [[ " $existing " != *" $NOVA_PCPU_EXT_ACTIVATE "* ]]; then
        iniadd "$NOVA_CONF" filter_scheduler available_filters \
            "$NOVA_PCPU_EXT_ACTIVATE"
    fi
}

# devstack runs nova-compute through run_process, as the systemd unit
# devstack@n-cpu whose ExecStart is the command it is given. Start that
# unit again, the same way, with nova-pcpu-ext-compute and the same
# arguments.
function start_nova_pcpu_ext_compute {
    configure_nova_pcpu_ext_options "$NOVA_CPU_CONF"
    stop_process n-cpu
    run_process n-cpu \
        "$NOVA_BIN_DIR/nova-pcpu-ext-compute --config-file $NOVA_CPU_CONF" \
        "$LIBVIRT_GROUP"
}

# The tests find the hosts they need through the API; a test whose host
# kind is missing skips, and so do those that disable and enable compute
# services unless NOVA_PCPU_EXT_TEMPEST_DESTRUCTIVE is True.
function configure_nova_pcpu_ext_tempest {
    iniset "$TEMPEST_CONFIG" service_available nova_pcpu_ext True
    iniset "$TEMPEST_CONFIG" pcpu_ext destructive_tests \
        "$NOVA_PCPU_EXT_TEMPEST_DESTRUCTIVE"
    iniset "$TEMPEST_CONFIG" pcpu_ext status_storm_seconds \
        "$NOVA_PCPU_EXT_TEMPEST_STATUS_STORM_SECONDS"
}

# Remove what configure_* added to nova.conf.
function cleanup_nova_pcpu_ext {
    local conf option kept
    for conf in "$NOVA_CONF" "$NOVA_CPU_CONF"; do
        [[ -f "$conf" ]] || continue
        for option in $NOVA_PCPU_EXT_OPTIONS; do
            inidelete "$conf" pcpu_ext "$option"
        done
    done
    if [[ -f "$NOVA_CONF" ]]; then
        kept=$(iniget_multiline "$NOVA_CONF" filter_scheduler \
            available_filters | tr ' ' '\n' | grep -vx "$NOVA_PCPU_EXT_ACTIVATE")
        inidelete "$NOVA_CONF" filter_scheduler available_filters
        if [[ -n "$kept" ]]; then
            # shellcheck disable=SC2086
            iniset_multiline "$NOVA_CONF" filter_scheduler available_filters $kept
        fi
    fi
}

if is_service_enabled nova-pcpu-ext; then
    if [[ "$1" == "stack" && "$2" == "install" ]]; then
        echo_summary "Installing nova-pcpu-ext"
        install_nova_pcpu_ext
    elif [[ "$1" == "stack" && "$2" == "post-config" ]]; then
        echo_summary "Configuring nova-pcpu-ext"
        configure_nova_pcpu_ext_options "$NOVA_CONF"
        if is_service_enabled n-sch; then
            configure_nova_pcpu_ext_scheduler
        fi
    elif [[ "$1" == "stack" && "$2" == "extra" ]]; then
        if is_service_enabled n-cpu; then
            echo_summary "Running nova-compute as nova-pcpu-ext-compute"
            start_nova_pcpu_ext_compute
        fi
    elif [[ "$1" == "stack" && "$2" == "test-config" ]]; then
        if is_service_enabled tempest; then
            configure_nova_pcpu_ext_tempest
        fi
    fi

    if [[ "$1" == "unstack" ]]; then
        # devstack stops every service, n-cpu included; nothing else runs.
        :
    fi

    if [[ "$1" == "clean" ]]; then
        cleanup_nova_pcpu_ext
        pip_uninstall nova-pcpu-ext
    fi
fi
