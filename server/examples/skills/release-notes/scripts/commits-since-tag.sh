#!/bin/sh
# The commits since the newest tag reachable from HEAD (every commit if there is none): subject, then hash.
set -eu
since=$(git describe --tags --abbrev=0 2>/dev/null || true)
git log --no-merges --format='%s  (%h)' ${since:+"$since..HEAD"}
