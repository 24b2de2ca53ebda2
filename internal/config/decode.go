package config

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// textProblems finds what makes run-file text b no YAML a run file can
// hold, with its line and column: bytes that are not UTF-8 text (a binary
// file given as the run file) and control characters. The YAML decoder
// says only "invalid leading UTF-8 octet" or "control characters are not
// allowed" for them.
func textProblems(b []byte, name string) []FieldError {
	line, col := 1, 1
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			return []FieldError{{File: name, Line: line, Col: col,
				Msg: fmt.Sprintf("byte 0x%02x is not UTF-8 text: a run file is YAML text; is %s the run file (not a binary or compressed file)?", b[i], name)}}
		case r == '\n':
			line, col = line+1, 0
		case r < 0x20 && r != '\t' && r != '\r', r == 0x7f:
			return []FieldError{{File: name, Line: line, Col: col,
				Msg: fmt.Sprintf("control character 0x%02x: a run file is YAML text; is %s the run file (not a binary file)?", r, name)}}
		}
		i += size
		col++
	}
	return nil
}

// notNumbers finds the values YAML reads as NaN or infinity (.nan, .inf),
// which no field takes and which JSON cannot hold: the decoder says only
// "json: unsupported value: NaN". Each is named with its field and place.
func (s *source) notNumbers() []FieldError {
	var out []FieldError
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				key := n.Content[i].Value
				if path != "" {
					key = path + "." + key
				}
				walk(n.Content[i+1], key)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, path+"["+strconv.Itoa(i)+"]")
			}
		case yaml.ScalarNode:
			if n.ShortTag() != "!!float" {
				return
			}
			switch strings.ToLower(strings.TrimLeft(n.Value, "+-")) {
			case ".nan", ".inf":
				f := FieldError{File: s.name, Path: path, Msg: fmt.Sprintf("%s is not a number this field can take: give a finite number", n.Value)}
				if s.lines {
					f.Line, f.Col = n.Line, n.Column
				}
				if flag, ok := s.flags[n]; ok {
					f.Flag = flag
				}
				out = append(out, f)
			}
		}
	}
	if s.doc != nil {
		walk(s.doc, "")
	}
	return out
}
