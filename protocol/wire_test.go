package protocol

import "testing"

func TestIsSecretEnv(t *testing.T) {
	t.Parallel()
	for kv, want := range map[string]bool{
		"WDC_LAUNCH_CREDENTIAL=wdcl_x": true,
		"WDC_SESSION_TOKEN=wdcs_x":     true,
		"WDC_SESSION_TOKEN":            true, // a bare name
		"WDC_WORKER_TOKEN=old":         true, // earlier versions' name
		"WDC_SESSION_TOKEN_X=1":        false,
		"PATH=/usr/bin":                false,
		"WDC_TASK=task.x":              false,
		"":                             false,
	} {
		if got := IsSecretEnv(kv); got != want {
			t.Errorf("IsSecretEnv(%q) = %v, want %v", kv, got, want)
		}
	}
}
