package agentcli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wdc-dev/wdc/agent"
	"github.com/wdc-dev/wdc/protocol"
)

// TestAgentWorkAfterParse: the agent's Run only hands its work over
// (Env.Then); the work does it, and reports what it returns like any
// command's error.
func TestAgentWorkAfterParse(t *testing.T) {
	t.Parallel()
	e := &Env{Environ: []string{}}
	if err := (&AgentCmd{Server: "http://127.0.0.1:1", WorkDir: t.TempDir()}).Run(e); err != nil || e.Then == nil {
		t.Fatalf("AgentCmd.Run = %v (work handed over: %v); want nil and the work handed over", err, e.Then != nil)
	}
	if err := e.Then(); err == nil || !strings.HasPrefix(err.Error(), "no credential") {
		t.Errorf("the agent's work without a credential: %v; want the no credential error", err)
	}
}

// writeJoinFile writes a join file of pool with CA fingerprint pin.
func writeJoinFile(t *testing.T, pool, pin string) string {
	t.Helper()
	b, err := json.Marshal(protocol.JoinFile{FormatVersion: protocol.JoinFileFormatVersion, ID: "jt-1", Pool: pool,
		Credential: protocol.JoinCredentialPrefix + "secret", CASHA256: pin})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "join.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCredential: the join file's credential (for its pool only), else the
// launch credential of the environment; the pin of the flag, else
// WDC_CA_SHA256, else the join file's, and never two that disagree.
func TestCredential(t *testing.T) {
	t.Parallel()
	pinA, pinB := strings.Repeat("a", 64), strings.Repeat("b", 64)
	joinA := writeJoinFile(t, "edge", pinA)
	env := func(kv ...string) func(string) string {
		e := &Env{Environ: kv}
		return e.getenv
	}
	tests := []struct {
		name                    string
		getenv                  func(string) string
		joinFile, pool, pin     string
		wantCredential, wantPin string
		wantErr                 string
	}{
		{"launch credential and pin from the environment", env("WDC_LAUNCH_CREDENTIAL=wdcl_x", "WDC_CA_SHA256="+pinB), "", "", "",
			"wdcl_x", pinB, ""},
		{"the flag's pin wins over the environment's", env("WDC_CA_SHA256=" + pinB), "", "", pinA, "", pinA, ""},
		{"the join file's credential and pin", env("WDC_LAUNCH_CREDENTIAL=wdcl_x"), joinA, "edge", "", "wdcj_secret", pinA, ""},
		{"the same pin, written with colons and capitals", env(), joinA, "", strings.ToUpper(strings.Repeat("aa:", 31) + "aa"), "wdcj_secret",
			strings.ToUpper(strings.Repeat("aa:", 31) + "aa"), ""},
		{"a join file of another pool", env(), joinA, "core", "", "", "", `the join file ` + joinA + ` is for pool "edge", not "core"`},
		{"a pin that contradicts the join file", env("WDC_CA_SHA256=" + pinB), joinA, "", "", "", "", "differs from the join file's CA fingerprint"},
		{"no credential at all", env(), "", "", "", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cred, pin, err := Credential(tt.getenv, tt.joinFile, tt.pool, tt.pin)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Credential error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || cred != tt.wantCredential || pin != tt.wantPin {
				t.Errorf("Credential = %q, %q, %v; want %q, %q", cred, pin, err, tt.wantCredential, tt.wantPin)
			}
		})
	}
}

// TestRejoin: with a join file the agent joins again, with a bounded
// backoff, when its apply ended or was replaced; never after a drain, a
// refused credential or with a launch credential.
func TestRejoin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		joinFile bool
		err      error
		want     bool
	}{
		{true, fmt.Errorf("agent: %w: 401", agent.ErrSessionRefused), true},
		{true, fmt.Errorf("agent: %w at http://x for 2s", agent.ErrUnreachable), true},
		{true, nil, false},
		{true, errors.New("agent: the coordinator refused the credential: credential_revoked"), false},
		{false, fmt.Errorf("agent: %w: 401", agent.ErrSessionRefused), false},
		{false, fmt.Errorf("agent: %w", agent.ErrUnreachable), false},
	} {
		if got := rejoinReason(tc.joinFile, tc.err) != ""; got != tc.want {
			t.Errorf("rejoinReason(%v, %v) = %v, want %v", tc.joinFile, tc.err, got, tc.want)
		}
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for n, w := range want {
		if got := rejoinDelay(n); got != w {
			t.Errorf("rejoinDelay(%d) = %s, want %s", n, got, w)
		}
	}
	if got := rejoinDelay(1000); got != rejoinMaxDelay {
		t.Errorf("rejoinDelay(1000) = %s, want the cap %s", got, rejoinMaxDelay)
	}
}
