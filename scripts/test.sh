#!/usr/bin/env bash
# Runs every test of evlbi: formatting and lint, the Rust unit/integration/property tests
# (real packets and files), the baseband cross-checks, and bounded fuzzing. Exit code 0 only if
# all pass. Idempotent: installs what it needs through scripts/setup.sh.
#
#   scripts/test.sh              everything
#   FUZZ_SECONDS=0 scripts/test.sh   skip fuzzing
#
# What it takes on 2 cores: the first run on a fresh clone about 40 min — scripts/setup.sh
# installs packages with apt and builds the peers (jive5ab, SFXC's reader, DiFX) into
# ~/.cache/evlbi and the venv into .venv, ~25 min; the release and test builds; the tests; the
# README's examples (scripts/readme_examples.py, a few minutes); fuzzing, 30 s for each of the
# 16 targets, ~8 min. The peers, .venv and target/ stay cached, so later runs skip the installs
# and the peer builds and recompile only what changed.
set -uo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
passed=0
failed=0
failures=()

step() { # step NAME COMMAND...: run, show output, count tests from the runners' closing lines
    local name=$1
    shift
    printf '\n\033[1m== %s\033[0m\n' "$name"
    "$@" 2>&1 | tee "$log/out"
    local rc=${PIPESTATUS[0]}
    local p f
    p=$(grep -oE '(test result: [a-zA-Z]+\. )?[0-9]+ passed' "$log/out" | grep -oE '[0-9]+ passed' | awk '{s+=$1} END {print s+0}')
    f=$(grep -oE '[0-9]+ failed' "$log/out" | awk '{s+=$1} END {print s+0}')
    [[ $p -eq 0 && $rc -eq 0 ]] && p=1 # a check without a test count counts as one
    passed=$((passed + p))
    failed=$((failed + f))
    if [[ $rc -ne 0 ]]; then
        [[ $f -eq 0 ]] && failed=$((failed + 1))
        failures+=("$name")
    fi
}

step "setup (venv, release build)" scripts/setup.sh
if ((${#failures[@]})); then
    # Every later step needs the build: they would only repeat its error (or, as the baseband
    # cross-check does, fail 26 times over a missing binary).
    echo "FAILED steps: setup (venv, release build): see its output above; nothing else was run"
    exit 1
fi
step "architecture (layers, long functions)" scripts/check_architecture.py
step "architecture checker self-test" scripts/check_architecture.py --self-test
step "cargo fmt --check" cargo fmt --all --check
step "cargo clippy" cargo clippy --workspace --all-targets --locked -q -- -D warnings
step "cargo test" cargo test --workspace --release --locked --no-fail-fast
step "baseband cross-check" .venv/bin/pytest -q tests/crosscheck
step "README examples harness self-test" scripts/readme_examples.py --self-test
step "README examples" scripts/readme_examples.py
if [[ "${FUZZ_SECONDS:-30}" != 0 ]]; then
    step "fuzz (${FUZZ_SECONDS:-30} s per target)" scripts/fuzz.sh "${FUZZ_SECONDS:-30}"
fi

echo
if ! scripts/jive5ab-path >/dev/null; then
    # The interop tests pass without a peer to talk to: say so where nobody can miss it.
    echo "SKIPPED: the jive5ab interop tests had no jive5ab (scripts/setup.sh builds it from ../shared/peers when cmake and g++ exist)"
fi
if ! scripts/sfxc-path >/dev/null; then
    echo "SKIPPED: the SFXC tests had no mk5:// reader harness (scripts/build-sfxc.sh builds it from ../shared/peers when g++ exists)"
fi
if ! scripts/difx-path >/dev/null || ! command -v mpirun >/dev/null; then
    echo "SKIPPED: the DiFX tests (crates/cli/tests/difx_cli.rs) had no mpifxcorr (scripts/build-difx.sh builds it from ../shared/peers)"
fi
for t in promtool prometheus systemd-analyze strace; do
    # The service tests (contrib/: alert rules, systemd unit) pass without their tool too.
    if ! command -v "$t" >/dev/null; then
        echo "SKIPPED: the service tests that need $t (crates/cli/tests/service_cli.rs): $t is not installed"
    fi
done
if ((${#failures[@]})); then
    echo "FAILED steps: ${failures[*]}"
fi
echo "tests: $passed passed, $failed failed"
[[ ${#failures[@]} -eq 0 ]]
