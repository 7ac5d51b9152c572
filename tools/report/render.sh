#!/usr/bin/env bash
# Renders an HTML page in headless Chromium (Debian's package `chromium`):
#
#   tools/report/render.sh PAGE.html SHOT.png [DOM.html] [FRAGMENT] [SCALE]
#
# writes a screenshot of file://PAGE.html#FRAGMENT, 1280 CSS pixels wide, SCALE device pixels
# per CSS pixel (default 1), to SHOT.png and, when DOM.html is given, the document as it is
# after its scripts ran (one browser start for both). Runs as root too (no sandbox), offline
# (no background networking), with a fresh profile folder each time.
set -euo pipefail
page=$(realpath "$1")
shot=$2
dom=${3:-}
frag=${4:+#$4}
scale=${5:-1}
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[ -n "$browser" ] || { echo "render.sh: no chromium on PATH (Debian package chromium)" >&2; exit 1; }
profile=$(mktemp -d "${TMPDIR:-/tmp}/clrmux-chromium.XXXXXX")
trap 'rm -rf "$profile"' EXIT
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --no-default-browser-check
       --disable-background-networking --disable-component-update --disable-sync --disable-extensions
       --hide-scrollbars --mute-audio --user-data-dir="$profile" --window-size=1280,1150
       --force-device-scale-factor="$scale" --virtual-time-budget=5000)
[ -n "$dom" ] && flags+=(--dump-dom)
timeout 120 "$browser" "${flags[@]}" --screenshot="$shot" "file://$page$frag" >"${dom:-/dev/null}" 2>"$profile.err" || {
    cat "$profile.err" >&2; rm -f "$profile.err"; exit 1; }
rm -f "$profile.err"
[ -s "$shot" ] || { echo "render.sh: chromium wrote no screenshot" >&2; exit 1; }
