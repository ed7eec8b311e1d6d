package placement

import "testing"

func TestSatisfies(t *testing.T) {
	tests := []struct {
		labels, placement map[string]string
		want              bool
	}{
		{nil, nil, true},
		{map[string]string{"a": "1"}, nil, true},
		{map[string]string{"a": "1"}, map[string]string{"a": "1"}, true},
		{map[string]string{"a": "1"}, map[string]string{"a": "2"}, false},
		{nil, map[string]string{"a": ""}, false},
		{map[string]string{"a": "1", "b": "2"}, map[string]string{"a": "1", "b": "2"}, true},
	}
	for _, tt := range tests {
		if got := Satisfies(tt.labels, tt.placement); got != tt.want {
			t.Errorf("Satisfies(%v, %v) = %v, want %v", tt.labels, tt.placement, got, tt.want)
		}
	}
}

func TestText(t *testing.T) {
	for _, tt := range []struct {
		m    map[string]string
		want string
	}{
		{nil, "{}"},
		{map[string]string{"b": "2", "a": "1"}, "a=1, b=2"},
		{map[string]string{"a\nb": "x\u202e"}, `"a\nb"="x\u202e"`},
	} {
		if got := Text(tt.m); got != tt.want {
			t.Errorf("Text(%v) = %q, want %q", tt.m, got, tt.want)
		}
	}
}
