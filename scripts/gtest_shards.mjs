// Deals the tests `--gtest_list_tests` prints (stdin) to N shards by weight, heaviest first to the
// lightest shard: a test weighs its seconds in the weights file (the heaviest, measured), any
// other 0.5 (about the others' mean). Prints one line per shard, a --gtest_filter of its tests
// (empty: no test for it).
//   node scripts/gtest_shards.mjs N WEIGHTS_FILE < list
import fs from 'node:fs';

const [n, weightsFile] = [Number(process.argv[2]), process.argv[3]];
const weights = new Map();
for (const line of fs.readFileSync(weightsFile, 'utf8').split('\n')) {
  const m = /^\s*([\d.]+)\s+(\S+)/.exec(line.replace(/#.*/, ''));
  if (m) weights.set(m[2], Number(m[1]));
}
// "Suite." lines, then "  Test  # GetParam() = ..." lines
const tests = [];
let suite = '';
for (const line of fs.readFileSync(0, 'utf8').split('\n')) {
  if (!line.trim()) continue;
  if (!line.startsWith(' ')) suite = line.trim().split(/\s+/)[0];
  else tests.push(suite + line.trim().split(/\s+/)[0]);
}
const shards = Array.from({ length: n }, () => ({ load: 0, tests: [] }));
const weightOf = (t) => weights.get(t) ?? 0.5;
for (const t of [...tests].sort((a, b) => weightOf(b) - weightOf(a))) {
  const s = shards.reduce((a, b) => (b.load < a.load ? b : a));
  s.load += weightOf(t);
  s.tests.push(t);
}
for (const s of shards) console.log(s.tests.join(':'));
