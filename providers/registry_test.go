package providers

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// fake is a provider that does nothing, named name.
type fake struct{ name string }

func (f *fake) Name() string { return f.name }
func (f *fake) Launch(context.Context, LaunchRequest) (LaunchResponse, error) {
	return LaunchResponse{}, nil
}
func (f *fake) Stop(context.Context, StopRequest) error { return nil }
func (f *fake) Status(context.Context, StatusRequest) (StatusResponse, error) {
	return StatusResponse{}, nil
}
func (f *fake) Wait(context.Context, WaitRequest) (WaitResponse, error) { return WaitResponse{}, nil }
func (f *fake) Cleanup(context.Context, CleanupRequest) error           { return nil }
func (f *fake) Reclaim(context.Context, ReclaimRequest) (ReclaimResponse, error) {
	return ReclaimResponse{}, nil
}

// fakeRenderer is a fake that is a Renderer.
type fakeRenderer struct{ fake }

func (f *fakeRenderer) RenderLaunch(_ context.Context, req LaunchRequest) (RenderResponse, error) {
	return RenderResponse{Argv: Render(req)}, nil
}

// fakeDryRunner is a fake that is a DryRunner.
type fakeDryRunner struct{ fake }

func (f *fakeDryRunner) DryRunLaunch(context.Context, LaunchRequest) (DryRunResponse, error) {
	return DryRunResponse{}, nil
}

// panicky's Name panics.
type panicky struct{ fake }

func (*panicky) Name() string { panic("no name today") }

func of(p Provider) func() Provider { return func() Provider { return p } }

func TestRegisterContractErrors(t *testing.T) {
	t.Parallel()
	ok := of(&fake{name: "ok"})
	tests := []struct {
		name    string
		info    Info
		factory func() Provider
		rule    Rule
		detail  string
	}{
		{"empty name", Info{Source: "test"}, ok, RuleName, `the name "" is not a provider name`},
		{"upper case", Info{Name: "Local", Source: "test"}, ok, RuleName, "must match ^[a-z][a-z0-9-]*$"},
		{"starts with a digit", Info{Name: "8s", Source: "test"}, ok, RuleName, "is not a provider name"},
		{"underscore", Info{Name: "my_cloud", Source: "test"}, ok, RuleName, "is not a provider name"},
		{"no source", Info{Name: "ok"}, ok, RuleSource, "Info.Source is empty"},
		{"nil factory", Info{Name: "ok", Source: "test"}, nil, RuleFactory, "the factory is nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := NewRegistry()
			err := r.Register(tt.info, tt.factory)
			var cerr *ContractError
			if !errors.As(err, &cerr) {
				t.Fatalf("Register = %v, want a *ContractError", err)
			}
			if cerr.Rule != tt.rule || cerr.Provider != tt.info.Name || !strings.Contains(cerr.Detail, tt.detail) {
				t.Errorf("Register = %+v, want rule %s, provider %q, detail with %q", cerr, tt.rule, tt.info.Name, tt.detail)
			}
			if want := `provider "` + tt.info.Name + `" fails its contract (` + string(tt.rule) + "): "; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("message %q, want it to start %q", err, want)
			}
			if len(r.Names()) != 0 || len(r.List()) != 0 {
				t.Errorf("a refused provider is registered: %v", r.Names())
			}
		})
	}
}

func TestRegisterDuplicate(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	info := Info{Name: "twice", Source: "test"}
	if err := r.Register(info, of(&fake{name: "twice"})); err != nil {
		t.Fatal(err)
	}
	err := r.Register(info, of(&fake{name: "twice"}))
	if !errors.Is(err, ErrDuplicate) || !strings.Contains(err.Error(), `"twice"`) {
		t.Errorf("second Register = %v, want ErrDuplicate naming it", err)
	}
}

// TestLookupContractErrors: what the factory makes is checked by Lookup,
// List and Validate alike, and refused with the rule it breaks.
func TestLookupContractErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		caps    Capabilities
		factory func() Provider
		rule    Rule   // "" when it keeps its contract
		detail  string // in the ContractError's Detail
	}{
		{"plain provider", Capabilities{}, of(&fake{name: "p"}), "", ""},
		{"cluster writes need no method", Capabilities{ClusterWrites: true}, of(&fake{name: "p"}), "", ""},
		{"renderer that claims Render", Capabilities{Render: true}, of(&fakeRenderer{fake{name: "p"}}), "", ""},
		{"dry runner that claims DryRun", Capabilities{DryRun: true}, of(&fakeDryRunner{fake{name: "p"}}), "", ""},
		{"factory returns nil", Capabilities{}, func() Provider { return nil }, RuleFactory, "returned no provider (nil)"},
		{"factory returns a typed nil", Capabilities{}, func() Provider { var f *fake; return f }, RuleFactory, "making or checking the provider panicked"},
		{"factory panics", Capabilities{}, func() Provider { panic("boom") }, RuleFactory, "panicked: boom"},
		{"Name panics", Capabilities{}, of(&panicky{}), RuleFactory, "panicked: no name today"},
		{"empty Name", Capabilities{}, of(&fake{name: ""}), RuleName, `its Name method returns "", but it is registered as "p"`},
		{"another Name", Capabilities{}, of(&fake{name: "q"}), RuleName, `returns "q", but it is registered as "p"`},
		{"claims Render, no Renderer", Capabilities{Render: true}, of(&fake{name: "p"}), RuleRender, "Info claims Render, but *providers.fake has no RenderLaunch method"},
		{"Renderer, Render not claimed", Capabilities{}, of(&fakeRenderer{fake{name: "p"}}), RuleRender, "implements providers.Renderer, but Info does not claim Render"},
		{"claims DryRun, no DryRunner", Capabilities{DryRun: true}, of(&fake{name: "p"}), RuleDryRun, "Info claims DryRun, but *providers.fake has no DryRunLaunch method"},
		{"DryRunner, DryRun not claimed", Capabilities{}, of(&fakeDryRunner{fake{name: "p"}}), RuleDryRun, "implements providers.DryRunner, but Info does not claim DryRun"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := NewRegistry()
			info := Info{Name: "p", Source: "test", Summary: "a test provider", Capabilities: tt.caps}
			if err := r.Register(info, tt.factory); err != nil {
				t.Fatalf("Register: %v (it checks only what it can without the factory)", err)
			}
			p, lookupErr := r.Lookup("p")
			list := r.List()
			validateErr := r.Validate()
			if len(list) != 1 || list[0].Info != info {
				t.Fatalf("List = %+v, want the one provider with its Info", list)
			}
			if tt.rule == "" {
				if lookupErr != nil || p == nil || list[0].Status != StatusAvailable || list[0].Err != nil || validateErr != nil {
					t.Errorf("Lookup = %v, %v; List = %+v; Validate = %v; want it available", p, lookupErr, list, validateErr)
				}
				return
			}
			if p != nil {
				t.Errorf("Lookup returned a provider that fails its contract: %v", p)
			}
			for what, err := range map[string]error{"Lookup": lookupErr, "List": list[0].Err, "Validate": validateErr} {
				var cerr *ContractError
				if !errors.As(err, &cerr) {
					t.Errorf("%s = %v, want a *ContractError", what, err)
					continue
				}
				if cerr.Provider != "p" || cerr.Rule != tt.rule || !strings.Contains(cerr.Detail, tt.detail) {
					t.Errorf("%s = %+v, want provider p, rule %s, detail with %q", what, cerr, tt.rule, tt.detail)
				}
			}
			if list[0].Status != StatusInvalid {
				t.Errorf("List status %s, want %s", list[0].Status, StatusInvalid)
			}
		})
	}
}

func TestValidateJoinsEveryContractError(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	for _, p := range []struct {
		info    Info
		factory func() Provider
	}{
		{Info{Name: "good", Source: "test"}, of(&fake{name: "good"})},
		{Info{Name: "liar", Source: "test", Capabilities: Capabilities{Render: true}}, of(&fake{name: "liar"})},
		{Info{Name: "misnamed", Source: "test"}, of(&fake{name: "other"})},
	} {
		if err := r.Register(p.info, p.factory); err != nil {
			t.Fatal(err)
		}
	}
	err := r.Validate()
	for _, want := range []string{`provider "liar" fails its contract (render)`, `provider "misnamed" fails its contract (name)`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want it to say %s", err, want)
		}
	}
	if strings.Contains(err.Error(), `"good"`) {
		t.Errorf("Validate names a provider that keeps its contract: %v", err)
	}
}

func TestListAndLookupOfPlannedProviders(t *testing.T) {
	t.Parallel()
	r := NewRegistry(Info{Name: "ray", Summary: "Ray jobs"}, Info{Name: "kubernetes", Summary: "Kubernetes Jobs", Source: "ignored"})
	if err := r.Register(Info{Name: "local", Source: SourceBuiltIn}, of(&fake{name: "local"})); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range r.List() {
		got = append(got, e.Info.Name+":"+string(e.Status)+":"+e.Info.Source)
	}
	if want := "kubernetes:planned: local:available:built-in ray:planned:"; strings.Join(got, " ") != want {
		t.Errorf("List = %q, want %q (sorted; a planned one has no source)", got, want)
	}
	for name, want := range map[string]error{"ray": ErrNotBuilt, "kubernetes": ErrNotBuilt, "nomad": ErrUnknown} {
		if _, err := r.Lookup(name); !errors.Is(err, want) || !strings.Contains(err.Error(), "[local]") {
			t.Errorf("Lookup(%q) = %v, want %v listing [local]", name, err, want)
		}
	}

	// Once a planned provider is built, it is listed once, as registered.
	if err := r.Register(Info{Name: "ray", Source: SourceBuiltIn, Summary: "built now"}, of(&fake{name: "ray"})); err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, e := range r.List() {
		got = append(got, e.Info.Name+":"+string(e.Status))
	}
	if want := "kubernetes:planned local:available ray:available"; strings.Join(got, " ") != want {
		t.Errorf("List after ray registered = %q, want %q", got, want)
	}
	if p, err := r.Lookup("ray"); err != nil || p.Name() != "ray" {
		t.Errorf("Lookup(ray) = %v, %v", p, err)
	}
}

// TestRegisterPanicsWithTheContractError: the package's Register, called
// from init, panics on a programming error, with the typed error.
func TestRegisterPanicsWithTheContractError(t *testing.T) {
	defer func() {
		v := recover()
		err, _ := v.(error)
		var cerr *ContractError
		if !errors.As(err, &cerr) || cerr.Rule != RuleName {
			t.Errorf("Register panicked with %v, want a *ContractError of rule name", v)
		}
		for _, n := range Names() {
			if n == "Bad Name" {
				t.Errorf("the invalid provider was registered")
			}
		}
	}()
	Register(Info{Name: "Bad Name", Source: "test"}, of(&fake{name: "Bad Name"}))
	t.Fatal("Register of an invalid name did not panic")
}

func TestCapabilityHelpers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	req := LaunchRequest{Executable: "wdc", ServerURL: "http://127.0.0.1:1", Pool: "p", WorkDir: "/w"}
	if _, err := RenderLaunch(ctx, &fake{name: "p"}, req); !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), `provider "p"`) {
		t.Errorf("RenderLaunch of a provider that is no Renderer = %v, want ErrNotSupported naming it", err)
	}
	if _, err := DryRun(ctx, &fake{name: "p"}, req); !errors.Is(err, ErrNotSupported) {
		t.Errorf("DryRun of a provider that is no DryRunner = %v, want ErrNotSupported", err)
	}
	if resp, err := RenderLaunch(ctx, &fakeRenderer{fake{name: "p"}}, req); err != nil || len(resp.Argv) == 0 {
		t.Errorf("RenderLaunch of a Renderer = %+v, %v", resp, err)
	}
	if _, err := DryRun(ctx, &fakeDryRunner{fake{name: "p"}}, req); err != nil {
		t.Errorf("DryRun of a DryRunner = %v", err)
	}
}
