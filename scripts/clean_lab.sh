#!/bin/sh
# Remove everything the lab created and nothing else: containers, images and volumes labelled
# org.mcpserver.lab, official bases the lab pulled (listed in .cache/lab/pulled.txt), the lab's caches,
# results and venv. The Docker engine and debootstrap stay installed.
set -u
cd "$(dirname "$0")/.."
LABEL=org.mcpserver.lab
CACHE="${LAB_CACHE:-.cache/lab}"
say() { printf 'clean-lab: %s\n' "$*" >&2; }

if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
    ids=$(docker ps -aq --filter "label=$LABEL")
    [ -z "$ids" ] || { say "removing $(echo "$ids" | wc -l) containers"; docker rm -f -v $ids >/dev/null; }
    if [ -f "$CACHE/pulled.txt" ]; then
        while read -r ref; do
            [ -n "$ref" ] && docker rmi "$ref" >/dev/null 2>&1 && say "removed pulled base $ref"
        done < "$CACHE/pulled.txt"
    fi
    # Newest first (children before the images they build on); a second pass takes what a first one
    # could not remove while a child still stood.
    ids=$(docker images -q --filter "label=$LABEL" | awk '!seen[$0]++')
    [ -z "$ids" ] || say "removing $(echo "$ids" | wc -l) images"
    for pass in 1 2 3; do
        ids=$(docker images -q --filter "label=$LABEL" | awk '!seen[$0]++')
        [ -z "$ids" ] && break
        docker rmi -f $ids >/dev/null 2>&1
    done
    left=$(docker images -q --filter "label=$LABEL" | wc -l)
    [ "$left" = 0 ] || say "$left labelled images could not be removed: see docker images --filter label=$LABEL"
    # The legacy builder's intermediate images of lab builds, now untagged.
    docker image prune -f --filter "label=$LABEL" >/dev/null
    vols=$(docker volume ls -q --filter "label=$LABEL")
    [ -z "$vols" ] || { say "removing $(echo "$vols" | wc -l) volumes"; docker volume rm -f $vols >/dev/null; }
else
    say "no Docker engine answers: engine-side leftovers (label $LABEL) cannot be removed now"
fi
for path in "$CACHE" matrix/results .venv-lab; do
    [ -e "$path" ] && { say "removing $path"; rm -rf "$path"; }
done
exit 0
