package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// RecommendationsFile is the file, in the attempt's directory
// ($WDC_ATTEMPT_DIR), where a command writes the follow-up work it
// recommends. A task never starts other work itself: each recommendation
// becomes a proposal only through an edge block that declares its type, and
// runs only once approved.
const RecommendationsFile = "recommendations.json"

// Limits of a recommendations file.
const (
	// MaxRecommendationsBytes is the largest recommendations file a worker
	// sends, in bytes (64 KiB).
	MaxRecommendationsBytes = 64 << 10
	// MaxRecommendations is how many entries of one file are judged; the
	// ones after it are rejected.
	MaxRecommendations = 32
	// MaxRecommendationTypeLength is the longest type, in bytes.
	MaxRecommendationTypeLength = 64
	// MaxRecommendationDepth is how deep the arrays and objects of an
	// input may nest (the input object itself is depth 1).
	MaxRecommendationDepth = 32
)

// Recommendation is one entry of a recommendations file, as
// DecodeRecommendations read it. When Problem is not "", the entry is
// rejected for that reason (Type may then be ""); Input is a JSON object
// otherwise ("{}" when the entry has none).
type Recommendation struct {
	Type    string
	Input   json.RawMessage
	Problem string
}

// DecodeRecommendations reads a recommendations file: a JSON list of
// objects with a string "type" and an optional object "input", nothing
// else. A Problem says what is wrong with its entry ("its type is empty"),
// without naming the entry: the caller does. It never fails as a whole: a file that is not a list gives one entry
// with a Problem; an entry that does not fit, and every entry after the
// first MaxRecommendations, gives an entry with a Problem, in place. An
// empty list gives none.
func DecodeRecommendations(raw []byte) []Recommendation {
	if len(raw) > MaxRecommendationsBytes {
		return []Recommendation{{Problem: fmt.Sprintf("%s is %d bytes, more than the %d allowed", RecommendationsFile, len(raw), MaxRecommendationsBytes)}}
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil || list == nil {
		return []Recommendation{{Problem: RecommendationsFile + ` is not a JSON list of {"type": ..., "input": {...}} objects`}}
	}
	out := make([]Recommendation, 0, len(list))
	for i, item := range list {
		r := decodeRecommendation(item)
		if i >= MaxRecommendations {
			r = Recommendation{Type: r.Type, Problem: fmt.Sprintf("it is beyond the first %d: at most %d recommendations are judged per attempt",
				MaxRecommendations, MaxRecommendations)}
		}
		out = append(out, r)
	}
	return out
}

func decodeRecommendation(item json.RawMessage) Recommendation {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(item, &fields); err != nil || fields == nil {
		return Recommendation{Problem: "it is not a JSON object"}
	}
	var typ string
	if t, ok := fields["type"]; !ok || json.Unmarshal(t, &typ) != nil {
		return Recommendation{Problem: `it has no "type" string`}
	}
	r := Recommendation{Type: typ, Input: json.RawMessage("{}")}
	switch {
	case typ == "":
		r.Problem = "its type is empty"
	case len(typ) > MaxRecommendationTypeLength || !utf8.ValidString(typ):
		r.Type = ""
		r.Problem = fmt.Sprintf("its type is longer than %d bytes or not UTF-8", MaxRecommendationTypeLength)
	}
	for k := range fields {
		if k != "type" && k != "input" && r.Problem == "" {
			r.Problem = fmt.Sprintf(`it has the field %q; an entry has only "type" and "input"`, k)
		}
	}
	if in, ok := fields["input"]; ok {
		trimmed := bytes.TrimSpace(in)
		var obj map[string]json.RawMessage
		switch {
		case json.Unmarshal(trimmed, &obj) != nil || obj == nil:
			if r.Problem == "" {
				r.Problem = `its "input" is not a JSON object`
			}
		case depth(trimmed) > MaxRecommendationDepth:
			if r.Problem == "" {
				r.Problem = fmt.Sprintf(`its "input" nests arrays and objects deeper than %d levels`, MaxRecommendationDepth)
			}
		default:
			var buf bytes.Buffer
			if json.Compact(&buf, trimmed) == nil {
				r.Input = buf.Bytes()
			}
		}
	}
	return r
}

// depth is how deep the arrays and objects of the JSON value raw nest,
// outside its strings.
func depth(raw []byte) int {
	d, deepest, inString, escaped := 0, 0, false, false
	for _, c := range raw {
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case inString && c == '"':
			inString = false
		case inString:
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			d++
			deepest = max(deepest, d)
		case c == '}' || c == ']':
			d--
		}
	}
	return deepest
}
