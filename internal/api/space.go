package api

import (
	"bytes"
	"errors"
	"slices"
	"sort"
	"unicode/utf8"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/hpsearch/hpsearch/client"
	"github.com/hpsearch/hpsearch/internal/search"
	"github.com/hpsearch/hpsearch/internal/spec"
)

// askTellCommand is the trainer of an ask/tell study's stored space
// document. The server runs no trainer for such a study: the command only
// marks the study as one its client evaluates, and is no program.
const askTellCommand = "hpsearch:ask-tell"

// modeOf says who evaluates a study's trials.
func modeOf(sp *spec.Spec) client.Mode {
	if slices.Equal(sp.Trainer.Command, []string{askTellCommand}) {
		return client.ModeAskTell
	}
	return client.ModeRun
}

// decodeSpace decodes the space document of a study of the given mode and
// checks that its sampler can run. An ask/tell document has no trainer; it
// is given the ask/tell marker. Problems are reported as spec.Errors, with
// the line and column of each in doc.
func (s *Server) decodeSpace(filename string, doc []byte, mode client.Mode) (*spec.Spec, error) {
	root := rootMapping(doc)
	decoded := doc
	var extra spec.Errors
	if mode == client.ModeAskTell && root != nil {
		if line, col, ok := keyPos(root, "trainer"); ok {
			extra = append(extra, &spec.Error{File: filename, Line: line, Col: col, Msg: "an ask/tell study runs no trainer: its client evaluates the trials; remove trainer"})
		} else {
			decoded = withAskTellTrainer(doc, root)
		}
	}
	sp, err := spec.Decode(filename, decoded)
	var errs spec.Errors
	if err != nil && !errors.As(err, &errs) {
		return nil, err
	}
	// Problems past the end of doc are in the added trainer; they are
	// reported by decoding doc itself.
	lines := bytes.Count(doc, []byte("\n")) + 1
	errs = slices.DeleteFunc(errs, func(e *spec.Error) bool { return e.Line > lines })
	if err != nil && len(errs) == 0 {
		_, err = spec.Decode(filename, doc)
		errors.As(err, &errs)
	}
	errs = append(errs, extra...)
	if sp != nil && len(errs) == 0 {
		errs = s.checkSpace(filename, root, sp, mode)
	}
	if len(errs) > 0 {
		sort.SliceStable(errs, func(i, j int) bool {
			if errs[i].Line != errs[j].Line {
				return errs[i].Line < errs[j].Line
			}
			return errs[i].Col < errs[j].Col
		})
		return nil, errs
	}
	return sp, nil
}

// checkSpace reports what a valid space document may not do through the
// API: run a command (unless the server allows it), use the ask/tell
// marker as a trainer, or use a sampler that cannot run on its space.
func (s *Server) checkSpace(filename string, root *ast.MappingNode, sp *spec.Spec, mode client.Mode) spec.Errors {
	at := func(msg string, path ...string) spec.Errors {
		line, col, _ := keyPos(root, path...)
		return spec.Errors{{File: filename, Line: line, Col: col, Msg: msg}}
	}
	if mode == client.ModeRun && len(sp.Trainer.Command) > 0 {
		if modeOf(sp) == client.ModeAskTell {
			return at("trainer.command "+askTellCommand+" is reserved for ask/tell studies; create the study with mode=ask_tell and no trainer", "trainer", "command")
		}
		if !s.cfg.AllowCommands {
			return at("this server runs no command trainers: they would run any program as the server's user; use a builtin trainer, or start the server with --allow-commands", "trainer", "command")
		}
	}
	if _, err := search.New(sp); err != nil {
		return at(err.Error(), "sampler")
	}
	return nil
}

// rootMapping parses doc and returns its first document's root mapping,
// or nil when it has none; spec.Decode reports why.
func rootMapping(doc []byte) *ast.MappingNode {
	f, err := parser.ParseBytes(doc, 0)
	if err != nil || len(f.Docs) == 0 {
		return nil
	}
	m, _ := f.Docs[0].Body.(*ast.MappingNode)
	return m
}

// keyPos returns the line and column of the key at path under m, or of
// the deepest key of path there is (1:1 if none); ok says the whole path
// was found.
func keyPos(m *ast.MappingNode, path ...string) (line, col int, ok bool) {
	line, col = 1, 1
	for i, name := range path {
		v := entry(m, name)
		if v == nil {
			return line, col, false
		}
		line, col = nodeLine(v.Key)
		if i == len(path)-1 {
			return line, col, true
		}
		m, _ = v.Value.(*ast.MappingNode)
	}
	return line, col, false
}

// valuePos returns the line and column of the value of key under m, or
// 1:1 if there is none.
func valuePos(m *ast.MappingNode, key string) (line, col int) {
	if v := entry(m, key); v != nil {
		return nodeLine(v.Value)
	}
	return 1, 1
}

// entry finds key in m; m may be nil.
func entry(m *ast.MappingNode, key string) *ast.MappingValueNode {
	if m == nil {
		return nil
	}
	for _, v := range m.Values {
		if tk := v.Key.GetToken(); tk != nil && tk.Value == key {
			return v
		}
	}
	return nil
}

func nodeLine(n ast.Node) (line, col int) {
	tk := n.GetToken()
	if tk == nil || tk.Position == nil {
		return 1, 1
	}
	return tk.Position.Line, tk.Position.Column
}

// withAskTellTrainer returns doc with the ask/tell trainer added to its
// root mapping where no line or column of doc moves: at the end of a
// block mapping, or before the closing brace of a flow (JSON) one.
func withAskTellTrainer(doc []byte, root *ast.MappingNode) []byte {
	if root.IsFlowStyle {
		if root.End == nil || root.End.Position == nil {
			return doc
		}
		at := offsetOf(doc, root.End.Position.Line, root.End.Position.Column)
		entry := `"trainer": {"command": ["` + askTellCommand + `"]}`
		if len(root.Values) > 0 {
			entry = ", " + entry
		}
		out := append(bytes.Clone(doc[:at]), entry...)
		return append(out, doc[at:]...)
	}
	indent := 0
	if len(root.Values) > 0 {
		if tk := root.Values[0].Key.GetToken(); tk != nil && tk.Position != nil {
			indent = tk.Position.Column - 1
		}
	}
	out := bytes.Clone(doc)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	out = append(out, bytes.Repeat([]byte(" "), indent)...)
	return append(out, `trainer: {command: ["`+askTellCommand+`"]}`+"\n"...)
}

// offsetOf is the byte offset of a 1-based line and column (in runes).
func offsetOf(doc []byte, line, col int) int {
	off := 0
	for l := 1; l < line; l++ {
		i := bytes.IndexByte(doc[off:], '\n')
		if i < 0 {
			return len(doc)
		}
		off += i + 1
	}
	for c := 1; c < col && off < len(doc); c++ {
		_, size := utf8.DecodeRune(doc[off:])
		off += size
	}
	return off
}
