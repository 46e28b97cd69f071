# Sourced by scripts/demo and scripts/test: create .venv on first use and keep it in step with
# the project's dependency files (re-installs when pyproject.toml or requirements/ change).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${DPSPEC_VENV:-$ROOT/.venv}"
PY="${PYTHON:-python3}"
EXTRAS="${1:-test}"
stamp_of() { cat "$ROOT/pyproject.toml" "$ROOT"/requirements/*.txt | sha256sum | cut -c1-16; echo "$EXTRAS"; }
want="$(stamp_of | tr '\n' ' ')"
if [ ! -x "$VENV/bin/python" ]; then
  echo "dpspec: creating $VENV" >&2
  "$PY" -m venv "$VENV"
fi
have="$(cat "$VENV/.dpspec-stamp" 2>/dev/null || true)"
if [ "$have" != "$want" ]; then
  echo "dpspec: installing dependencies into $VENV (once)" >&2
  "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
  # torch first, pinned to a CPU build, so that later ranges are satisfied without a CUDA build.
  extra=()
  if "$VENV/bin/python" -c "import socket; socket.setdefaulttimeout(3); socket.gethostbyname('download.pytorch.org')" \
      2>/dev/null; then
    extra=(--extra-index-url https://download.pytorch.org/whl/cpu)
  fi
  "$VENV/bin/python" -m pip install -q ${extra[@]+"${extra[@]}"} -r "$ROOT/requirements/torch.txt"
  "$VENV/bin/python" -m pip install -q -e "$ROOT[$EXTRAS]"
  echo "$want" > "$VENV/.dpspec-stamp"
fi
export PATH="$VENV/bin:$PATH"
