package protocol

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDecodeRecommendations(t *testing.T) {
	many := "[" + strings.Repeat(`{"type":"t"},`, MaxRecommendations) + `{"type":"t"}]`
	tests := []struct {
		name string
		raw  string
		want []Recommendation // Input "" means "{}"
	}{
		{"empty list", `[]`, []Recommendation{}},
		{"one with input", `[{"type":"flake","input":{"run": "42"}}]`, []Recommendation{{Type: "flake", Input: json.RawMessage(`{"run":"42"}`)}}},
		{"no input", `[{"type":"ticket"}]`, []Recommendation{{Type: "ticket"}}},
		{"not a list", `{"type":"flake"}`, []Recommendation{{Problem: "is not a JSON list"}}},
		{"not JSON", `[{"type":`, []Recommendation{{Problem: "is not a JSON list"}}},
		{"null", `null`, []Recommendation{{Problem: "is not a JSON list"}}},
		{"entry not object", `[1, {"type":"a"}]`, []Recommendation{{Problem: "it is not a JSON object"}, {Type: "a"}}},
		{"no type", `[{"input":{}}]`, []Recommendation{{Problem: `it has no "type" string`}}},
		{"type not string", `[{"type":5}]`, []Recommendation{{Problem: `it has no "type" string`}}},
		{"empty type", `[{"type":""}]`, []Recommendation{{Problem: "its type is empty"}}},
		{"long type", `[{"type":"` + strings.Repeat("x", 65) + `"}]`, []Recommendation{{Problem: "longer than 64 bytes"}}},
		{"input not object", `[{"type":"a","input":[1]}]`, []Recommendation{{Type: "a", Problem: `"input" is not a JSON object`}}},
		{"input null", `[{"type":"a","input":null}]`, []Recommendation{{Type: "a", Problem: `"input" is not a JSON object`}}},
		{"extra field", `[{"type":"a","run":"x"}]`, []Recommendation{{Type: "a", Problem: `has the field "run"`}}},
		{"deep input", `[{"type":"a","input":{"x":` + strings.Repeat("[", 32) + strings.Repeat("]", 32) + `}}]`,
			[]Recommendation{{Type: "a", Problem: "deeper than 32 levels"}}},
		{"as deep as allowed", `[{"type":"a","input":{"x":` + strings.Repeat("[", 31) + strings.Repeat("]", 31) + `}}]`,
			[]Recommendation{{Type: "a", Input: json.RawMessage(`{"x":` + strings.Repeat("[", 31) + strings.Repeat("]", 31) + `}`)}}},
		{"brackets in strings do not nest", `[{"type":"a","input":{"x":"` + strings.Repeat("[{", 40) + `\"]"}}]`,
			[]Recommendation{{Type: "a", Input: json.RawMessage(`{"x":"` + strings.Repeat("[{", 40) + `\"]"}`)}}},
		{"beyond the cap", many, func() []Recommendation {
			out := make([]Recommendation, MaxRecommendations+1)
			for i := range out[:MaxRecommendations] {
				out[i] = Recommendation{Type: "t"}
			}
			out[MaxRecommendations] = Recommendation{Type: "t", Problem: "beyond the first 32"}
			return out
		}()},
		{"too large", `[` + strings.Repeat(" ", MaxRecommendationsBytes) + `]`, []Recommendation{{Problem: "more than the 65536 allowed"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := DecodeRecommendations([]byte(tt.raw))
			if len(got) != len(tt.want) {
				t.Fatalf("got %d entries %+v, want %d", len(got), got, len(tt.want))
			}
			for i, w := range tt.want {
				g := got[i]
				if g.Type != w.Type {
					t.Errorf("entry %d: type %q, want %q", i, g.Type, w.Type)
				}
				if (w.Problem == "") != (g.Problem == "") || !strings.Contains(g.Problem, w.Problem) {
					t.Errorf("entry %d: problem %q, want one containing %q", i, g.Problem, w.Problem)
				}
				want := string(w.Input)
				if want == "" {
					want = "{}"
				}
				if g.Problem == "" && string(g.Input) != want {
					t.Errorf("entry %d: input %s, want %s", i, g.Input, want)
				}
			}
		})
	}
}

func FuzzDecodeRecommendations(f *testing.F) {
	for _, s := range []string{`[]`, `[{"type":"a","input":{"k":"v"}}]`, `[1]`, `{}`, `[{"type":"` + "\xff" + `"}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		for i, r := range DecodeRecommendations(raw) {
			if r.Problem != "" {
				continue
			}
			if r.Type == "" || len(r.Type) > MaxRecommendationTypeLength {
				t.Fatalf("entry %d accepted with type %q", i, r.Type)
			}
			var obj map[string]any
			if err := json.Unmarshal(r.Input, &obj); err != nil || obj == nil {
				t.Fatalf("entry %d accepted with input %q, not an object", i, r.Input)
			}
			if depth(r.Input) > MaxRecommendationDepth {
				t.Fatalf("entry %d accepted with input nested %d deep", i, depth(r.Input))
			}
		}
	})
}
