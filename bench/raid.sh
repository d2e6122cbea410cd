#!/usr/bin/env bash
# bench/raid.sh: the engine's benchmarks (go test -bench ./raid), printed as
# ratios against the yardsticks measured in the same run:
#   - full-stripe RAID5 writes vs. this machine's memory copy (target >= 0.5x)
#   - rebuild rate vs. writing one member file sequentially (target >= 0.8x)
#   - rebuild rate under client load vs. its minimum-rate limit (target 0.8-1.2x)
#   - rate-limited rebuild time of a 100% and a 10% written array vs. what
#     the limit allows for a full member (target ~1x and ~0.1x)
#   - resync after a crash at two array sizes (time should follow dirty regions)
# File-backed benchmarks use /dev/shm when present. BENCHTIME sets -benchtime
# for the memory benchmarks (default 1s).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
go test -run '^$' -bench 'Memcpy|FullStripeWrite|RandomWrite4K|BenchmarkRead' -benchtime "${BENCHTIME:-1s}" -count 3 ./raid | tee -a "$out"
go test -run '^$' -bench 'SeqWriteFile|Rebuild|ResyncAfterCrash' -benchtime 3x ./raid | tee -a "$out"
python3 - "$out" <<'PY'
import re, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    m = re.match(r'(Benchmark\S+?)(-\d+)?\s+\d+\s+(.*)', line)
    if not m:
        continue
    name, rest = m.group(1), m.group(3)
    metrics = dict((u, float(v)) for v, u in re.findall(r'([\d.]+) ([^\s]+)', rest))
    rows.setdefault(name, []).append(metrics)
def med(name, unit):
    vals = [r[unit] for r in rows.get(name, []) if unit in r]
    return statistics.median(vals) if vals else None
print()
memcpy = med('BenchmarkMemcpy', 'MB/s')
for n in sorted(k for k in rows if k.startswith('BenchmarkFullStripeWrite')):
    v = med(n, 'MB/s')
    print(f'{n:55s} {v:9.0f} MB/s  {v/memcpy:5.2f}x memcpy ({memcpy:.0f} MB/s)' + ('  target >= 0.5x' if 'raid5' in n else ''))
seq = med('BenchmarkSeqWriteFile', 'MB/s')
for n in sorted(k for k in rows if k.startswith('BenchmarkRebuild/')):
    v = med(n, 'MB/s')
    print(f'{n:55s} {v:9.0f} MB/s  {v/seq:5.2f}x sequential file write ({seq:.0f} MB/s)')
r = med('BenchmarkRebuildRateLimit', 'rate/limit')
if r is not None:
    print(f'{"BenchmarkRebuildRateLimit":55s} {r:9.3f} x the minimum rate under client load (target 0.8-1.2)')
for n in sorted(k for k in rows if k.startswith('BenchmarkRebuildLimited/')):
    print(f'{n:55s} {med(n, "x-full-at-limit"):9.3f} x the time the limit allows for a full member')
for n in sorted(k for k in rows if k.startswith('BenchmarkResyncAfterCrash')):
    ns = med(n, 'ns/op')
    print(f'{n:55s} {ns/1e6:9.1f} ms  {med(n, "rows-resynced"):.0f} of {med(n, "rows-total"):.0f} rows resynced')
PY
