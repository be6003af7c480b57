#!/usr/bin/env bash
# Install Label Studio 1.23 into its own virtualenv (it pins many packages), once.
# The server tests start it from there: $PATTERNCNN_LS_VENV, default ~/.cache/patterncnn/label-studio-venv.
set -euo pipefail
venv="${PATTERNCNN_LS_VENV:-$HOME/.cache/patterncnn/label-studio-venv}"
if [ -x "$venv/bin/label-studio" ] && "$venv/bin/python" -c "import label_studio" 2>/dev/null; then
  echo "Label Studio already installed in $venv"
  exit 0
fi
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --upgrade pip 2>&1 | { grep -v "^WARNING: Location" || true; }
"$venv/bin/pip" install --quiet "label-studio==1.23.*" 2>&1 | { grep -v "^WARNING: Location" || true; }
echo "Label Studio installed in $venv"
