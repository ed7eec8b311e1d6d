package plural

import "testing"

func TestCountAndWord(t *testing.T) {
	tests := []struct {
		n          int
		word, text string
	}{
		{0, "tasks", "0 tasks"},
		{1, "task", "1 task"},
		{2, "tasks", "2 tasks"},
		{-1, "tasks", "-1 tasks"},
	}
	for _, tt := range tests {
		if got := Word(tt.n, "task", "tasks"); got != tt.word {
			t.Errorf("Word(%d) = %q, want %q", tt.n, got, tt.word)
		}
		if got := Count(tt.n, "task", "tasks"); got != tt.text {
			t.Errorf("Count(%d) = %q, want %q", tt.n, got, tt.text)
		}
	}
}
