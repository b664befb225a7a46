package proto

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// declaredTypes returns the Type constants the package declares, by
// value, read from its source: what the table must have a row for.
func declaredTypes(t *testing.T) map[Type]string {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	out := map[Type]string{}
	for _, f := range files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Type" {
					continue
				}
				for i, name := range vs.Names {
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok {
						t.Fatalf("%s: not a literal value", name.Name)
					}
					v, err := strconv.Atoi(lit.Value)
					if err != nil || v < 0 || v > 255 {
						t.Fatalf("%s = %s: not a type value", name.Name, lit.Value)
					}
					if prev, dup := out[Type(v)]; dup {
						t.Fatalf("%s and %s share the value %d", prev, name.Name, v)
					}
					out[Type(v)] = name.Name
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no Type constants found")
	}
	return out
}

// snake turns "TypeCheckResult" into "check_result".
func snake(constName string) string {
	var b strings.Builder
	for i, r := range strings.TrimPrefix(constName, "Type") {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// TestTypeTable walks every type value: a declared type has a complete
// row, an undeclared one none.
func TestTypeTable(t *testing.T) {
	declared := declaredTypes(t)
	answers := map[Type]Type{} // response -> its request
	for i := range 256 {
		typ := Type(i)
		r := table[typ]
		constName, ok := declared[typ]
		if !ok {
			if r.name != "" || r.new != nil || r.answer != 0 || r.senders != 0 || r.apart || r.epoch != nil || r.own != nil {
				t.Errorf("type %d: a row but no Type constant", i)
			}
			continue
		}
		if r.name != snake(constName) {
			t.Errorf("%s: name %q, want %q", constName, r.name, snake(constName))
		}
		if r.new == nil {
			t.Errorf("%s: no constructor", constName)
			continue
		}
		m := r.new()
		if m == nil || m.Type() != typ {
			t.Errorf("%s: constructor makes %T", constName, m)
			continue
		}
		if r.answer != 0 {
			if _, ok := declared[r.answer]; !ok || table[r.answer].answer != 0 || r.answer == TypeError {
				t.Errorf("%s: answer %s is not a response", constName, r.answer)
			}
			if prev, dup := answers[r.answer]; dup {
				t.Errorf("%s and %s share the answer %s", prev, typ, r.answer)
			}
			answers[r.answer] = typ
		} else if r.senders != 0 || r.apart {
			t.Errorf("%s: a response with senders or run apart", constName)
		}
		// A message with an Epoch field says how to read it.
		f := reflect.ValueOf(m).Elem().FieldByName("Epoch")
		switch {
		case f.IsValid() && r.epoch == nil:
			t.Errorf("%s: has an Epoch but its row cannot read it", constName)
		case !f.IsValid() && r.epoch != nil:
			t.Errorf("%s: reads an epoch it does not have", constName)
		case f.IsValid():
			f.SetUint(0xfeed)
			if e, ok := EpochOf(m); !ok || e != 0xfeed {
				t.Errorf("%s: EpochOf = %d, %v; want %d", constName, e, ok, 0xfeed)
			}
		}
	}
	// Every response but Error answers one request.
	for typ, name := range declared {
		if table[typ].answer == 0 && typ != TypeError {
			if _, ok := answers[typ]; !ok {
				t.Errorf("%s: a response no request is answered with", name)
			}
		}
	}
}
