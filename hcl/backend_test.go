package hcl

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestBackendBlock(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      *BackendSettings
	}{
		{"none", `wdc {}`, nil},
		{"defaults", `wdc {
  backend "s3" {
    bucket = "ci-state"
    key    = "wdc/state.db"
  }
}`, &BackendSettings{Type: "s3", Bucket: "ci-state", Key: "wdc/state.db", LockTTL: DefaultBackendLockTTL}},
		{"every setting, from variables", `variable "endpoint" {
  default = "http://127.0.0.1:9000"
}
wdc {
  backend "s3" {
    bucket     = "ci-state"
    key        = "wdc/state.db"
    endpoint   = var.endpoint
    region     = "eu-west-1"
    path_style = true
    profile    = "ci"
    lock_ttl   = "2m"
  }
}`, &BackendSettings{Type: "s3", Bucket: "ci-state", Key: "wdc/state.db", Endpoint: "http://127.0.0.1:9000", Region: "eu-west-1",
			PathStyle: true, Profile: "ci", LockTTL: 2 * time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "main.wdc.hcl"), []byte(tc.src), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, diags := Load(dir, withProviders(Inputs{}))
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			if diff := cmp.Diff(tc.want, cfg.Settings.Backend, cmpopts.IgnoreFields(BackendSettings{}, "Range")); diff != "" {
				t.Fatalf("Backend (-want +got):\n%s", diff)
			}
		})
	}
}
