#!/usr/bin/env bash
# Check every hand-derived derivative in a file with `gradcli check`; exit 1 if any is wrong.
#
#   examples/ci/check_derivatives.sh examples/ci/derivatives.txt
#
# Each line: `expression | point | VAR=derivative ; VAR=derivative ...` ('#' starts a comment).
# gradcli cross-checks autograd against SymPy, finite differences and the complex step, and
# each derivative you wrote against all of them; its exit code says whether all agreed.
set -u
file="${1:?usage: $0 FILE}"
gradcli="${GRADCLI:-gradcli}"

trim() {
    local s="$1"
    s="${s#"${s%%[![:space:]]*}"}"
    printf '%s' "${s%"${s##*[![:space:]]}"}"
}

failed=0 checked=0 number=0
while IFS= read -r line || [ -n "$line" ]; do
    number=$((number + 1))
    line="${line%%#*}"
    [ -z "$(trim "$line")" ] && continue
    IFS='|' read -r expression point expected <<<"$line"
    expression="$(trim "$expression")"
    args=(check "$expression" --at "$(trim "$point")")
    IFS=';' read -r -a derivatives <<<"${expected:-}"
    for d in "${derivatives[@]}"; do
        d="$(trim "$d")"
        [ -n "$d" ] && args+=(--expect "$(trim "${d%%=*}")=${d#*=}")
    done
    checked=$((checked + 1))
    if output="$("$gradcli" "${args[@]}" 2>&1)"; then
        echo "ok    $file:$number  $expression"
    else
        failed=$((failed + 1))
        echo "FAIL  $file:$number  $expression"
        sed 's/^/      /' <<<"$output"
    fi
done <"$file"
echo "$checked checked, $failed failed"
[ "$failed" -eq 0 ]
