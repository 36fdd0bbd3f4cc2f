#!/usr/bin/env bash
# Measures the console's contrast on a real xterm: runs `recon` on a demo
# workspace in xterm under Xvfb, white and black, with and without tmux,
# with the background answered (OSC 11) and unknown, screenshots each with
# `xwd -root`, and has measure.py read the pixels into docs/contrast.md.
#
#   docs/contrast/run.sh [RECON_BINARY] [OUT_DIR]
#
# Needs Xvfb, xterm, xwd, xwininfo, xdotool, tmux, ImageMagick's convert and
# python3 (Debian: xvfb xterm x11-apps x11-utils xdotool tmux imagemagick).
# The screenshots are kept in OUT_DIR (default target/contrast).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
recon=$(realpath "${1:-target/release/recon}")
out=$(realpath -m "${2:-target/contrast}")
rm -rf "$out" && mkdir -p "$out"
time=$(date -u +%Y-%m-%dT%H:%M:%S.000Z) # ages on screen from now, the same in every case
keys=(5 j j j j j j) # every state in the queue; op-1007, a payload mismatch, selected
ws=$out/ws
"$recon" demo --workspace "$ws" >/dev/null
unset COLORFGBG RECON_THEME NO_COLOR TMUX
export COLORTERM=

display=:${RECON_CONTRAST_DISPLAY:-77}
Xvfb "$display" -screen 0 1600x1000x24 -nolisten tcp >"$out/xvfb.log" 2>&1 &
xvfb=$!
trap 'kill $xvfb' EXIT
export DISPLAY=$display
for _ in $(seq 50); do xdpyinfo >/dev/null 2>&1 && break; sleep 0.1; done

console=("$recon" --workspace "$ws" --reviewer ada --frozen-clock "$time")

# Where each style is on the screen: the same screen in a detached tmux
# with the light palette named, read back with its escapes.
conf=$out/tmux.conf
printf 'set -g status off\nset -g default-terminal tmux-256color\n' >"$conf"
tmux -S "$out/map.sock" -f "$conf" new-session -d -x 120 -y 40 \
  env TERM=tmux-256color "${console[@]}" --theme light
sleep 2
tmux -S "$out/map.sock" send-keys "${keys[@]}"
sleep 2
tmux -S "$out/map.sock" capture-pane -e -p >"$out/map.txt"
tmux -S "$out/map.sock" kill-server

# One case: NAME, background (white|black), tmux (no, plain, or the
# colour its window-style names, which tmux answers OSC 11 with), the
# terminal answering OSC 11 (true|false).
shot() {
  local name=$1 bg=$2 mux=$3 answers=$4 fg=black
  [ "$bg" = black ] && fg=white
  local command=("${console[@]}")
  if [ "$mux" != no ]; then
    local muxconf=$out/$name.conf
    cp "$conf" "$muxconf"
    if [ "$mux" != plain ]; then echo "set -g window-style bg=$mux" >>"$muxconf"; fi
    command=(tmux -S "$out/$name.sock" -f "$muxconf" new-session "${console[*]}")
  fi
  xterm -b 0 -bw 0 -geometry 120x40+0+0 -fa 'DejaVu Sans Mono' -fs 11 \
    -bg "$bg" -fg "$fg" -tn xterm-256color -xrm "XTerm*allowColorOps: $answers" \
    -e "${command[@]}" &
  local term=$!
  sleep 3
  xdotool mousemove 10 10
  for key in "${keys[@]}"; do xdotool key "$key"; done
  sleep 2
  xwininfo -root -children | grep -m1 '"xterm"' >"$out/$name.window" || true
  xwd -root -silent >"$out/$name.xwd"
  convert "xwd:$out/$name.xwd" "$out/$name.png"
  convert "xwd:$out/$name.xwd" "$out/$name.ppm"
  xdotool key q
  sleep 1
  if [ "$mux" != no ]; then tmux -S "$out/$name.sock" kill-server 2>/dev/null || true; fi
  kill "$term" 2>/dev/null || true
  wait "$term" 2>/dev/null || true
}

for bg in white black; do
  rgb='#ffffff'
  [ "$bg" = black ] && rgb='#000000'
  shot "$bg-xterm-answered" "$bg" no true
  shot "$bg-xterm-unknown" "$bg" no false
  shot "$bg-tmux-answered" "$bg" "$rgb" true
  shot "$bg-tmux-unknown" "$bg" plain true
done
# tmux's `white` is ANSI white, which xterm draws #e5e5e5.
shot white-tmux-ansi white white true
python3 "$here/measure.py" "$out" >"$here/../contrast.md"
echo "wrote docs/contrast.md from $out"
