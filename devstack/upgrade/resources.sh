#!/bin/bash
# Resources of the nova-pcpu-ext grenade plugin: an isolate server on
# dedicated CPUs and a disabled compute service, whose placement records
# must come through the upgrade: the server's allocation holds PCPU of a
# provider without HW_CPU_HYPERTHREADING, and the disabled compute's
# provider keeps COMPUTE_STATUS_DISABLED.
#
# Settings, from grenade's localrc or the environment:
#   NOVA_PCPU_EXT_GRENADE_IMAGE          image name or ID of the server
#                                        (default: devstack's image)
#   NOVA_PCPU_EXT_GRENADE_NIC            its --nic (default: none)
#   NOVA_PCPU_EXT_GRENADE_DISABLED_HOST  compute host to disable (default:
#                                        the first one not hosting the
#                                        server; none with one compute)
#   NOVA_PCPU_EXT_GRENADE_TIMEOUT        seconds to wait for the server and
#                                        the trait (default: 120)

set -o errexit
set -o pipefail
shopt -s inherit_errexit

source $GRENADE_DIR/grenaderc
source $GRENADE_DIR/functions

source $TOP_DIR/openrc admin admin

NOVA_PCPU_EXT_GRENADE_IMAGE=${NOVA_PCPU_EXT_GRENADE_IMAGE:-$DEFAULT_IMAGE_NAME}
# NOTE: the checks need no network, and "none" works without one.
NOVA_PCPU_EXT_GRENADE_NIC=${NOVA_PCPU_EXT_GRENADE_NIC:-none}
NOVA_PCPU_EXT_GRENADE_DISABLED_HOST=${NOVA_PCPU_EXT_GRENADE_DISABLED_HOST:-}
NOVA_PCPU_EXT_GRENADE_TIMEOUT=${NOVA_PCPU_EXT_GRENADE_TIMEOUT:-120}

PROJECT=nova-pcpu-ext
NAME=nova_pcpu_ext_isolate
DISABLED_REASON="nova-pcpu-ext grenade resources"

# Print the Python expression $1 of the JSON document d read from stdin;
# the other arguments are the list a.
function _json {
    python3 -c "import json, sys
d = json.load(sys.stdin)
a = sys.argv[1:]
print($1)" "${@:2}"
}

# NOTE: the openstack client has no resource provider commands without
# osc-placement, so placement (and the hypervisors' service hosts) are read
# with curl, a token and the catalog from the client.
function _login {
    TOKEN=$(openstack token issue -f value -c id)
    CATALOG=$(openstack catalog list -f json)
}

# GET PATH from the public endpoint of SERVICE_TYPE at microversion VERSION
# and print the JSON body.
function _get {
    local service_type=$1 version=$2 path=$3
    local url
    url=$(_json '[e["url"] for s in d if s["Type"] == a[0] for e in s["Endpoints"] if e["interface"] == "public" and a[1] in ("", e["region_id"])][0]' \
        "$service_type" "${OS_REGION_NAME:-}" <<< "$CATALOG" 2>/dev/null) ||
        die $LINENO "No public $service_type endpoint in the catalog"
    curl -sSf -H "X-Auth-Token: $TOKEN" \
        -H "OpenStack-API-Version: $version" "$url$path" ||
        die $LINENO "GET $path from $service_type failed"
}

# Succeed if provider $1 has trait $2.
function _has_trait {
    local traits
    traits=$(_get placement "placement 1.6" \
        "/resource_providers/$1/traits") || return 1
    [[ $(_json 'a[0] in d["traits"]' "$2" <<< "$traits") == True ]]
}

# Print the resource provider of compute host $1.
function _provider_of {
    local hypervisors
    hypervisors=$(_get compute "compute 2.53" /os-hypervisors/detail)
    _json '[h["id"] for h in d["hypervisors"] if h["service"]["host"] == a[0]][0]' \
        "$1" <<< "$hypervisors" 2>/dev/null ||
        die $LINENO "No compute node of host $1"
}

# Run COMMAND... until it succeeds; die after the timeout.
function _wait_for {
    local what=$1
    shift
    local deadline
    deadline=$((SECONDS + NOVA_PCPU_EXT_GRENADE_TIMEOUT))
    until "$@"; do
        if [[ $SECONDS -ge $deadline ]]; then
            die $LINENO "No $what after ${NOVA_PCPU_EXT_GRENADE_TIMEOUT}s"
        fi
        sleep 2
    done
}

function _server_active {
    local status
    status=$(openstack server show "$1" -f value -c status)
    if [[ "$status" == ERROR ]]; then
        die $LINENO "Server $1 is in ERROR: $(openstack server show "$1" \
            -f value -c fault)"
    fi
    [[ "$status" == ACTIVE ]]
}

function create {
    local flavor_id server_id host disabled provider
    if [[ -z "$NOVA_PCPU_EXT_GRENADE_IMAGE" ]]; then
        die $LINENO "Set NOVA_PCPU_EXT_GRENADE_IMAGE to an image name or ID"
    fi
    flavor_id=$(openstack flavor create --vcpus 1 --ram 128 --disk 1 \
        --property hw:cpu_policy=dedicated \
        --property hw:cpu_thread_policy=isolate -f value -c id $NAME)
    resource_save $PROJECT flavor_id $flavor_id
    server_id=$(openstack server create --flavor $flavor_id \
        --image "$NOVA_PCPU_EXT_GRENADE_IMAGE" \
        --nic "$NOVA_PCPU_EXT_GRENADE_NIC" -f value -c id $NAME)
    resource_save $PROJECT server_id $server_id
    _wait_for "ACTIVE server $server_id" _server_active $server_id
    echo "Server $server_id is ACTIVE"

    host=$(openstack server show $server_id -f value \
        -c OS-EXT-SRV-ATTR:host)
    disabled=$NOVA_PCPU_EXT_GRENADE_DISABLED_HOST
    if [[ -z "$disabled" ]]; then
        disabled=$(openstack compute service list --service nova-compute \
            -f value -c Host | sort | awk -v host="$host" '$0 != host' |
            head -n 1)
    fi
    if [[ -z "$disabled" ]]; then
        # NOTE: grenade's tests after the upgrade need a compute to boot on.
        echo "Only one compute ($host): no compute is disabled"
        return
    fi
    if [[ "$disabled" == "$host" ]]; then
        die $LINENO "NOVA_PCPU_EXT_GRENADE_DISABLED_HOST=$disabled hosts" \
            "server $server_id: name another compute host"
    fi
    _login
    provider=$(_provider_of "$disabled")
    openstack compute service set --disable \
        --disable-reason "$DISABLED_REASON" "$disabled" nova-compute
    resource_save $PROJECT disabled_host $disabled
    resource_save $PROJECT disabled_provider $provider
    _wait_for "COMPUTE_STATUS_DISABLED on provider $provider of $disabled" \
        _has_trait $provider COMPUTE_STATUS_DISABLED
    echo "Compute $disabled is disabled"
}

function verify {
    local server_id status allocations provider vcpu disabled
    server_id=$(resource_get $PROJECT server_id)
    status=$(openstack server show $server_id -f value -c status)
    if [[ "$status" != ACTIVE ]]; then
        die $LINENO "Server $server_id is $status, not ACTIVE"
    fi

    _login
    allocations=$(_get placement "placement 1.6" /allocations/$server_id)
    provider=$(_json '" ".join(p for p, r in d["allocations"].items() if "PCPU" in r["resources"])' \
        <<< "$allocations")
    vcpu=$(_json 'sum(r["resources"].get("VCPU", 0) for r in d["allocations"].values())' \
        <<< "$allocations")
    if [[ -z "$provider" || "$vcpu" != 0 ]]; then
        die $LINENO "Server $server_id does not hold PCPU only:" \
            "$allocations"
    fi
    if _has_trait $provider HW_CPU_HYPERTHREADING; then
        die $LINENO "Server $server_id holds PCPU of provider $provider," \
            "which has HW_CPU_HYPERTHREADING"
    fi
    echo "Server $server_id is ACTIVE on PCPU of provider $provider"

    disabled=$(resource_get $PROJECT disabled_host)
    if [[ -z "$disabled" ]]; then
        return
    fi
    status=$(openstack compute service list --service nova-compute \
        --host $disabled -f value -c Status)
    if [[ "$status" != disabled ]]; then
        die $LINENO "Compute service of $disabled is $status, not disabled"
    fi
    provider=$(resource_get $PROJECT disabled_provider)
    if ! _has_trait $provider COMPUTE_STATUS_DISABLED; then
        die $LINENO "Provider $provider of disabled compute $disabled" \
            "lacks COMPUTE_STATUS_DISABLED"
    fi
    echo "Compute $disabled is disabled, its provider has" \
        "COMPUTE_STATUS_DISABLED"
}

function verify_noapi {
    # NOTE: what this project changes lives in placement and in Nova's
    # services, all stopped in this phase; the guest itself is Nova's
    # (projects/60_nova) to check.
    :
}

function destroy {
    local disabled server_id flavor_id
    disabled=$(resource_get $PROJECT disabled_host)
    server_id=$(resource_get $PROJECT server_id)
    flavor_id=$(resource_get $PROJECT flavor_id)
    if [[ -n "$disabled" ]]; then
        echo "Enabling compute $disabled"
        openstack compute service set --enable $disabled nova-compute
    fi
    if [[ -n "$server_id" ]]; then
        echo "Deleting server $server_id"
        openstack server delete --wait $server_id
    fi
    if [[ -n "$flavor_id" ]]; then
        echo "Deleting flavor $flavor_id"
        openstack flavor delete $flavor_id
    fi
}

case $1 in
    "create")
        create
        ;;
    "verify")
        verify $2
        ;;
    "verify_noapi")
        verify_noapi $2
        ;;
    "destroy")
        destroy
        ;;
    "force_destroy")
        set +o errexit
        destroy
        ;;
    *)
        # NOTE: grenade calls every phase (early_create too) of every
        # project; a phase without resources here is not an error.
        echo "nova-pcpu-ext: nothing to do in resource phase $1"
        ;;
esac
