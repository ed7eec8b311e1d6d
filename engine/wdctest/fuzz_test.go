package wdctest

import (
	"os"
	"path/filepath"
	"testing"

	wdchcl "github.com/wdc-dev/wdc/hcl"
)

// FuzzAssert parses arbitrary bytes as a test file and evaluates every
// assertion of it against what a run of testConfig might have left:
// neither parsing nor evaluating (the references' values, the message)
// may panic, and a failure always has a message and a range.
func FuzzAssert(f *testing.F) {
	for _, s := range []string{
		"run \"a\" {\n  assert {\n    condition     = task.shard[0].status == \"succeeded\"\n    error_message = \"x ${task.shard[1].attempts}\"\n  }\n}\n",
		"run \"a\" {\n  assert {\n    condition     = length(proposals) == 1 && proposals[0].edge == \"rerun\"\n    error_message = \"p\"\n  }\n}\n",
		"run \"a\" {\n  assert {\n    condition     = task.shard[9].outputs[\"x\"]\n    error_message = task.train\n  }\n}\n",
		"run \"a\" {\n  assert {\n    condition     = [for s in task.shard : s.pool][0] == pool.cpu.provider\n    error_message = jsonencode(plan)\n  }\n}\n",
		"run \"a\" {\n  assert {\n    condition     = var.shards / 0 > 1\n    error_message = \"\"\n  }\n}\n",
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.wdc.hcl"), []byte(testConfig), 0o644); err != nil {
		f.Fatal(err)
	}
	cfg, diags := wdchcl.Load(dir, wdchcl.Inputs{})
	if diags.HasErrors() {
		f.Fatal(diags.Error())
	}
	ctx := EvalContext(cfg, observed())
	f.Fuzz(func(t *testing.T, src []byte) {
		tf, _ := wdchcl.ParseTestFile(src, "fuzz.wdctest.hcl")
		for _, r := range tf.Runs {
			for _, a := range r.Asserts {
				if fail := Assert(a, ctx, tf.File.Bytes); fail != nil && fail.Range.Filename == "" {
					t.Fatalf("a failure without a range: %+v", fail)
				}
			}
		}
	})
}
