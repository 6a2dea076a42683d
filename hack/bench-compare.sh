#!/usr/bin/env bash
# Usage: hack/bench-compare.sh BASE [PATTERN] [COUNT]
# Runs the benchmarks PATTERN matches (by default every one but the
# minutes-long BenchmarkScale, Convergence and NodeBurst, whose figures
# docs/benchmarks.md keeps) COUNT times at the git revision BASE and at the
# work tree, one package at a time, and compares them with benchstat.
set -euo pipefail
base=${1:?usage: hack/bench-compare.sh BASE [PATTERN] [COUNT]}
pattern=${2:-'^Benchmark(APIServerAdmission|Admission|CacheMemory|ConversionReview|Convert|DesiredState|NoChange|Read|SDKRoundTrip|UpdateBody)$'}
count=${3:-6}
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$tmp/base" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
git -C "$root" worktree add --detach "$tmp/base" "$base" >/dev/null
run() {
	(cd "$1" && go test -p 1 -run '^$' -bench "$pattern" -benchmem -count "$count" -timeout 2h ./... |
		grep -E '^(goos|goarch|pkg|cpu|Benchmark)') > "$2"
}
run "$tmp/base" "$tmp/base.txt"
run "$root" "$tmp/head.txt"
cd "$root" && go tool benchstat "base=$tmp/base.txt" "head=$tmp/head.txt"
