package spec

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"
)

// This file turns go-yaml AST nodes into plain Go values, keeping each
// value's position.
//
// Scalars decode to nil (null), string, int64, float64 or bool; mappings and
// lists stay *ast.MappingNode and *ast.SequenceNode. Unlike go-yaml, a plain
// scalar with an exponent and no dot, such as 1e-5, is a float, as in the
// YAML 1.2 core schema.

var (
	plainFloat = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)
	plainInt   = regexp.MustCompile(`^[-+]?[0-9]+$`)
)

// nodePos is where a node starts. A block mapping starts at its first key.
func nodePos(n ast.Node) pos {
	if m, ok := n.(*ast.MappingNode); ok && !m.IsFlowStyle && len(m.Values) > 0 {
		return nodePos(m.Values[0].Key)
	}
	tk := n.GetToken()
	if tk == nil || tk.Position == nil {
		return fileStart
	}
	return pos{tk.Position.Line, tk.Position.Column}
}

// isImplicitNull reports whether n is the empty value of a key written
// without one ("key:" and nothing after it).
func isImplicitNull(n ast.Node) bool {
	null, ok := n.(*ast.NullNode)
	return ok && null.Token != nil && null.Token.Type == token.ImplicitNullType
}

// value returns the Go value of n, or a message saying why n cannot be used
// in a space file.
func value(n ast.Node) (any, string) {
	switch n := n.(type) {
	case *ast.NullNode:
		return nil, ""
	case *ast.BoolNode:
		return n.Value, ""
	case *ast.IntegerNode:
		return integerValue(n)
	case *ast.FloatNode:
		return n.Value, ""
	case *ast.InfinityNode:
		return n.Value, ""
	case *ast.NanNode:
		return math.NaN(), ""
	case *ast.StringNode:
		return stringValue(n)
	case *ast.LiteralNode:
		return n.Value.Value, ""
	case *ast.MappingNode, *ast.SequenceNode:
		return n, ""
	case *ast.AnchorNode:
		return nil, "anchors (&name) are not supported in space files; write the value out in full"
	case *ast.AliasNode:
		return nil, "aliases (*name) are not supported in space files; write the value out in full"
	case *ast.TagNode:
		return nil, fmt.Sprintf("YAML tags (%s) are not supported in space files; remove the tag (quote a value to make it a string)", n.Start.Value)
	case *ast.MergeKeyNode:
		return nil, "merge keys (<<) are not supported in space files; write the keys out in full"
	}
	return nil, fmt.Sprintf("unsupported YAML %s; write a plain value", n.Type())
}

func integerValue(n *ast.IntegerNode) (any, string) {
	switch v := n.Value.(type) {
	case int64:
		return v, ""
	case uint64:
		if v <= math.MaxInt64 {
			return int64(v), ""
		}
	}
	return nil, outOfRange(n.Token.Value)
}

// stringValue reads plain scalars that go-yaml leaves as strings but that
// are numbers: floats like 1e-5, and integers too large for 64 bits.
func stringValue(n *ast.StringNode) (any, string) {
	if n.Token.Type != token.StringType || !plainFloat.MatchString(n.Value) {
		return n.Value, ""
	}
	if plainInt.MatchString(n.Value) {
		return nil, outOfRange(n.Value)
	}
	f, err := strconv.ParseFloat(n.Value, 64)
	if errors.Is(err, strconv.ErrRange) {
		return nil, fmt.Sprintf("number %s is out of range", n.Value)
	}
	return f, ""
}

func outOfRange(text string) string {
	return fmt.Sprintf("integer %s is out of range (-9223372036854775808 to 9223372036854775807)", text)
}

// keyName returns the name of a mapping key, or a message saying why it is
// not a valid key.
func keyName(k ast.MapKeyNode) (string, string) {
	var n ast.Node = k
	if mk, ok := k.(*ast.MappingKeyNode); ok {
		n = mk.Value
	}
	v, problem := value(n)
	if problem != "" {
		return "", problem
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Sprintf("keys must be names, got %s", describe(v))
	}
	return s, ""
}

// describe names a value for "got ..." in messages.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return "string " + quoteShort(v)
	case int64:
		return fmt.Sprintf("integer %d", v)
	case float64:
		return "number " + formatFloat(v)
	case bool:
		return fmt.Sprintf("boolean %t", v)
	case *ast.MappingNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("%T", v)
}

// num writes a number for a message.
func num(f float64) string {
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// show writes a scalar as it appears in messages: strings quoted.
func show(v any) string {
	if s, ok := v.(string); ok {
		return quoteShort(s)
	}
	return fmt.Sprint(v)
}

func quoteShort(s string) string {
	const maxLen = 40
	if r := []rune(s); len(r) > maxLen {
		return strconv.Quote(string(r[:maxLen])) + "..."
	}
	return strconv.Quote(s)
}
