#!/bin/sh
# Make sure a Docker engine answers before the lab runs, and that mmdebstrap is there to make bases.
#
# Order: an engine that already answers (DOCKER_HOST or the current docker context) is used as it is. An
# engine that was named (DOCKER_HOST, DOCKER_CONTEXT or a current context other than "default") and does
# not answer is an error: starting a local one instead would test somewhere else. Otherwise, on a Debian
# or Ubuntu host where we are root, install docker.io and mmdebstrap from the distro and start dockerd in
# the background, waiting with a deadline. Anywhere else, stop and say what to do.
# Exit codes: 0 ready, 1 could not provision (message says why and what to do).
set -eu

DEADLINE="${LAB_ENGINE_DEADLINE:-90}"
LOG="${LAB_DOCKERD_LOG:-/var/log/mcplab-dockerd.log}"

say() { printf 'lab: %s\n' "$*" >&2; }
die() { printf 'lab: %s\n' "$*" >&2; exit 1; }

engine_answers() { command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; }

is_debian_like() {
    [ -r /etc/os-release ] || return 1
    # shellcheck disable=SC1091
    . /etc/os-release
    case " ${ID:-} ${ID_LIKE:-} " in *" debian "*|*" ubuntu "*) return 0 ;; esac
    return 1
}

apt_install() {
    # apt-get update only once per call, and only when something is missing.
    say "installing $* from the distribution (apt-get)"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    # policy-rc.d keeps the package scripts from starting services we start ourselves below.
    if [ -e /usr/sbin/policy-rc.d ]; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
    else
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        trap 'rm -f /usr/sbin/policy-rc.d' EXIT  # never leave it behind, even if the install fails
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
        rm -f /usr/sbin/policy-rc.d
        trap - EXIT
    fi
}

if engine_answers; then
    say "Docker engine answers (server $(docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?'))"
else
    if [ -n "${DOCKER_HOST:-}" ]; then
        die "DOCKER_HOST=${DOCKER_HOST} does not answer. Start that engine, or unset DOCKER_HOST to let the lab start a local one."
    fi
    context="${DOCKER_CONTEXT:-$(docker context show 2>/dev/null || echo default)}"
    if [ "$context" != default ]; then
        die "the docker context '$context' does not answer. Start that engine, or 'docker context use default' to let the lab start a local one."
    fi
    if [ "$(id -u)" != 0 ] || ! is_debian_like; then
        die "no Docker engine answers and this host is not a Debian/Ubuntu machine where we are root, so the lab will not install one. Start a Docker engine (or point DOCKER_HOST at one), make sure 'docker info' works for this user (for a local engine: add the user to the docker group), then run 'make matrix' again."
    fi
    missing=""
    command -v dockerd >/dev/null 2>&1 || missing="docker.io"
    command -v docker >/dev/null 2>&1 || missing="docker.io"
    command -v mmdebstrap >/dev/null 2>&1 || missing="$missing mmdebstrap arch-test"
    # shellcheck disable=SC2086
    [ -z "$missing" ] || apt_install $missing
    if ! pgrep -x dockerd >/dev/null 2>&1; then
        say "starting dockerd in the background (log: $LOG)"
        nohup dockerd >"$LOG" 2>&1 &
    fi
    say "waiting up to ${DEADLINE}s for the engine to answer"
    waited=0
    until engine_answers; do
        waited=$((waited + 1))
        if [ "$waited" -ge "$DEADLINE" ]; then
            tail -n 20 "$LOG" >&2 || true
            die "dockerd did not answer within ${DEADLINE}s; its log tail is above (full log: $LOG)."
        fi
        sleep 1
    done
    say "Docker engine answers after ${waited}s (server $(docker version --format '{{.Server.Version}}'))"
fi

# Cells of another architecture run under qemu-user through the kernel's binfmt_misc: Debian's qemu-user-static
# registers its handlers with the F flag (the kernel opens the emulator once, so containers need none of their own),
# through binfmt-support. Where that cannot be had (not root, a kernel without binfmt_misc) those cells are
# reported unavailable with the reason, never failed, so this only says so.
if [ "$(id -u)" = 0 ] && is_debian_like; then
    if [ ! -e /proc/sys/fs/binfmt_misc/status ]; then
        mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc 2>/dev/null \
            || say "binfmt_misc cannot be mounted here: cells of other architectures will be reported unavailable"
    fi
    if [ -e /proc/sys/fs/binfmt_misc/status ] && [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
        if ! command -v update-binfmts >/dev/null 2>&1 || [ ! -e /usr/libexec/qemu-binfmt ]; then
            apt_install qemu-user-static binfmt-support
        fi
        # The package registers its handlers when binfmt-support's service starts; with no init running, do it here.
        update-binfmts --enable >/dev/null 2>&1 || true
    fi
else
    [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] \
        || say "qemu-user-static is not registered in binfmt_misc (needs root): cells of other architectures will be reported unavailable"
fi

# mmdebstrap makes Debian/Ubuntu bases when no registry can be reached (arch-test lets it make them for another
# architecture); without it those cells are reported unavailable, so install it where we can and otherwise say so.
if ! command -v mmdebstrap >/dev/null 2>&1 || ! command -v arch-test >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && is_debian_like; then
        apt_install mmdebstrap arch-test
    else
        say "mmdebstrap or arch-test is not installed: cells whose base must be bootstrapped will be reported unavailable"
    fi
fi
