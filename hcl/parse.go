package hcl

import (
	"bytes"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// pieceSize is the size from which parseConfig ends a piece of a file at
// the next top-level line. HCL's lexer appends every token of what it is
// given to one slice (about 100 bytes a token, grown by copying); pieces
// of this size keep that slice small and short-lived however large the
// file is. Parsing plan_large.sh's 800 KB file allocated 224 MB in one
// go, 160 MB in pieces of 512 bytes, 146 MB of 4 KiB, 188 MB of 8 KiB and
// 183 MB of 16 KiB (where the slice's last growth lands varies).
const pieceSize = 4 << 10

// parseConfig parses src as hclsyntax.ParseConfig does, returning the
// same file (body, blocks, ranges, navigation) and diagnostics, but parses
// a large file in pieces: it cuts src before lines that look like the
// start of a top-level block and parses each piece at its position in the
// file, then puts the pieces' blocks into the first piece's body.
//
// A cut is right when the piece before it parses without any diagnostic:
// then HCL's lexer ends that piece outside every string, comment, heredoc
// and bracket, in the state it starts a file in, so lexing the rest from
// the cut gives the tokens the whole file would. When any piece has a
// diagnostic, or a top-level attribute (the parser checks those across
// the file), the whole file is parsed again in one go, so its diagnostics
// are exactly HCL's.
func parseConfig(src []byte, filename string) (*hcl.File, hcl.Diagnostics) {
	f, diags, _ := parsePieces(src, filename, pieceSize)
	return f, diags
}

// parsePieces is parseConfig with pieces of at least size bytes; pieces
// is how many it used, 1 when it parsed the file in one go.
func parsePieces(src []byte, filename string, size int) (f *hcl.File, diags hcl.Diagnostics, pieces int) {
	whole := func() (*hcl.File, hcl.Diagnostics, int) {
		f, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
		return f, diags, 1
	}
	cuts := topLevelCuts(src, size)
	if len(cuts) == 0 {
		return whole()
	}
	var first *hcl.File
	var body, last *hclsyntax.Body
	start, pos := 0, hcl.InitialPos
	for i := 0; i <= len(cuts); i++ {
		end := len(src)
		if i < len(cuts) {
			end = cuts[i]
		}
		f, diags := hclsyntax.ParseConfig(src[start:end], filename, pos)
		b, ok := f.Body.(*hclsyntax.Body)
		if len(diags) > 0 || !ok || len(b.Attributes) > 0 {
			return whole()
		}
		if first == nil {
			first, body = f, b
		} else {
			body.Blocks = append(body.Blocks, b.Blocks...)
		}
		last = b
		pos = hcl.Pos{Line: pos.Line + bytes.Count(src[start:end], []byte{'\n'}), Column: 1, Byte: end}
		start = end
	}
	// The first piece's navigation (the "in task ..." context of a
	// diagnostic) refers to its body, which now holds every block.
	body.SrcRange = hcl.RangeBetween(body.SrcRange, last.SrcRange)
	body.EndRange = last.EndRange
	first.Bytes = src
	return first, nil, len(cuts) + 1
}

// topLevelCuts returns the offsets, at least size bytes apart, of lines
// that start with a letter or underscore (a block type) and that a rough
// scan puts outside every brace, bracket, string, comment and heredoc. The
// scan only has to be right for ordinary files: parseConfig checks every
// cut it uses.
func topLevelCuts(src []byte, size int) []int {
	if len(src) < 2*size {
		return nil
	}
	var cuts []int
	depth, from := 0, 0
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch c {
		case '{', '[', '(':
			depth++
		case '}', ']', ')':
			depth--
		case '"':
			// A quoted string ends at an unescaped quote or at the end of
			// the line; a template inside it is skipped with it.
			for i++; i < len(src) && src[i] != '"' && src[i] != '\n'; i++ {
				if src[i] == '\\' {
					i++
				}
			}
		case '#':
			i = lineEnd(src, i)
		case '/':
			switch {
			case i+1 < len(src) && src[i+1] == '/':
				i = lineEnd(src, i)
			case i+1 < len(src) && src[i+1] == '*':
				e := bytes.Index(src[i+2:], []byte("*/"))
				if e < 0 {
					return cuts
				}
				i += 2 + e + 1
			}
		case '<':
			if i+1 < len(src) && src[i+1] == '<' {
				i = heredocEnd(src, i)
				if i < 0 {
					return cuts
				}
			}
		case '\n':
			next := i + 1
			if depth == 0 && next-from >= size && len(src)-next >= size && next < len(src) && isNameStart(src[next]) {
				cuts = append(cuts, next)
				from = next
			}
		}
	}
	return cuts
}

// lineEnd returns the offset of the newline that ends the line holding
// offset i (its last byte is kept for the scan), or the last offset.
func lineEnd(src []byte, i int) int {
	if n := bytes.IndexByte(src[i:], '\n'); n >= 0 {
		return i + n - 1
	}
	return len(src) - 1
}

// heredocEnd skips a heredoc that starts with the "<<" at offset i: it
// returns the offset of the newline before its closing marker line, or -1
// when it does not end. A "<<" that does not introduce a heredoc is
// returned as it is.
func heredocEnd(src []byte, i int) int {
	j := i + 2
	if j < len(src) && src[j] == '-' {
		j++
	}
	k := j
	for k < len(src) && (isNameStart(src[k]) || src[k] == '-' || (src[k] >= '0' && src[k] <= '9')) {
		k++
	}
	if k == j || k >= len(src) || (src[k] != '\n' && src[k] != '\r') {
		return i + 1
	}
	marker := src[j:k]
	for line := lineEnd(src, k) + 2; line < len(src); {
		e := lineEnd(src, line) + 1
		if bytes.Equal(bytes.TrimSpace(src[line:min(e, len(src))]), marker) {
			return e - 1
		}
		line = e + 1
	}
	return -1
}

func isNameStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}
