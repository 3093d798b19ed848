package spec

import (
	"errors"
	"slices"
	"unicode/utf8"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// go-yaml's parser takes time quadratic in the number of keys and in the
// nesting depth, so files are limited in size and depth before parsing.
const (
	maxFileSize = 64 << 10
	maxDepth    = 100
)

// parse returns the root mapping of a one-document YAML file.
func (d *decoder) parse(data []byte) (*ast.MappingNode, bool) {
	if len(data) > maxFileSize {
		d.errorf(fileStart, "the space file is %d bytes, more than the limit of %d bytes", len(data), maxFileSize)
		return nil, false
	}
	if !utf8.Valid(data) {
		d.errorf(invalidUTF8(data), "the file is not valid UTF-8; save it as UTF-8")
		return nil, false
	}
	tokens := lexer.Tokenize(string(data))
	if tk := tooDeep(tokens); tk != nil {
		d.errorf(pos{tk.Position.Line, tk.Position.Column}, "the YAML nests more than %d levels deep here; space files nest only a few levels", maxDepth)
		return nil, false
	}
	f, err := parser.Parse(tokens, 0, parser.AllowDuplicateMapKey())
	if err != nil {
		d.syntaxError(err)
		return nil, false
	}
	docs := slices.DeleteFunc(f.Docs, func(doc *ast.DocumentNode) bool { return doc.Body == nil })
	if len(docs) == 0 {
		d.errorf(fileStart, "the space file is empty; it needs at least name, objective, parameters, trainer and max_trials")
		return nil, false
	}
	if len(docs) > 1 {
		d.errorf(docPos(docs[1]), "a space file holds one YAML document; remove the --- separator and what follows it")
	}
	root, ok := docs[0].Body.(*ast.MappingNode)
	if !ok {
		v, _ := value(docs[0].Body)
		d.errorf(fileStart, "the space file must be a mapping with keys like name:, objective: and parameters:, got %s", describe(v))
		return nil, false
	}
	return root, true
}

// docPos is where a document starts: its --- marker if it has one.
func docPos(doc *ast.DocumentNode) pos {
	if doc.Start != nil {
		return pos{doc.Start.Position.Line, doc.Start.Position.Column}
	}
	return nodePos(doc.Body)
}

// invalidUTF8 is the position of the first byte of data that is not UTF-8.
func invalidUTF8(data []byte) pos {
	p := pos{1, 1}
	for len(data) > 0 {
		r, size := utf8.DecodeRune(data)
		if r == utf8.RuneError && size <= 1 {
			return p
		}
		p.col++
		if r == '\n' {
			p = pos{p.line + 1, 1}
		}
		data = data[size:]
	}
	return p
}

func (d *decoder) syntaxError(err error) {
	var yerr yaml.Error
	if !errors.As(err, &yerr) || yerr.GetToken() == nil || yerr.GetToken().Position == nil {
		d.errorf(fileStart, "YAML syntax error: %v", err)
		return
	}
	p := yerr.GetToken().Position
	d.errorf(pos{p.Line, p.Column}, "YAML syntax error: %s", yerr.GetMessage())
}

// tooDeep returns the first token nested more than maxDepth levels deep,
// or nil. A token's depth is its indentation level, plus the block entries
// ("- " and "key:") before it on its line, plus the flow collections ([ and
// {) it is in.
func tooDeep(tokens token.Tokens) *token.Token {
	flow, line, onLine := 0, 0, 0
	for _, tk := range tokens {
		if tk.Position.Line != line {
			line, onLine = tk.Position.Line, 0
		}
		switch tk.Type {
		case token.SequenceStartType, token.MappingStartType:
			flow++
		case token.SequenceEndType, token.MappingEndType:
			flow--
		case token.SequenceEntryType, token.MappingValueType:
			if flow == 0 {
				onLine++
			}
		}
		if tk.Position.IndentLevel+onLine+flow > maxDepth {
			return tk
		}
	}
	return nil
}
