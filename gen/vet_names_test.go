package gen

import (
	"strings"
	"testing"

	"github.com/flowfabric/ff/compiler"
	"github.com/flowfabric/ff/dsl"
)

// vetReservedSource has execs whose methods of ConvertHandlers would have
// a name go vet's stdmethods check holds to the signature of a well-known
// interface (json.Marshaler, xml.Unmarshaler, gob.GobEncoder,
// io.ByteReader): a conversion pipeline may well call its steps so.
const vetReservedSource = `package convert

type Doc { id: string }

flow convert(Doc) -> Doc {
  exec unmarshal_xml(Doc) -> Doc {}
  exec marshal_json(Doc) -> Doc {}
  exec gob_encode(Doc) {}
  exec read_byte(Doc) {}
  unmarshal_xml -> marshal_json -> gob_encode
  marshal_json -> read_byte
  result marshal_json
}
`

// vetAcceptedSource has execs named like the methods go vet checks only
// in other shapes than those of a Handlers method: with a first parameter
// of another type than context.Context (Format, ReadFrom, Scan, Seek,
// WriteTo), or on types that implement error (Is, As, Unwrap). ffc
// accepts them, and TestGeneratedCodeBuilds vets the code generated for
// them.
const vetAcceptedSource = `package vetnames

type Doc { id: string }

flow convert(Doc) -> Doc {
  exec format(Doc) -> Doc {}
  exec read_from(Doc) -> Doc {}
  exec scan() {}
  exec seek(Doc) {}
  exec write_to(Doc) -> Doc {}
  exec is() {}
  exec as(Doc) {}
  exec unwrap(Doc) -> Doc {}
  exec peek() -> Doc {}
  format -> read_from -> write_to -> unwrap
  format -> scan
  read_from -> seek
  unwrap -> is
  write_to -> as
  result unwrap
}
`

// TestExecNamesGoVetReservesAreRefused: an exec whose method would have a
// name go vet holds to one signature (marshal_json becomes MarshalJSON,
// which vet wants to be MarshalJSON() ([]byte, error)) would give
// generated code, and handler types, that go vet rejects. ffc check
// refuses each such exec with FF0211 at its name, and Generate refuses a
// plan built by other means that has one.
func TestExecNamesGoVetReservesAreRefused(t *testing.T) {
	_, diags := compiler.Compile([]dsl.Source{{Name: "convert.ff", Data: []byte(vetReservedSource)}})
	want := map[int]string{6: "UnmarshalXML", 7: "MarshalJSON", 8: "GobEncode", 9: "ReadByte"} // 1-based lines
	for _, d := range diags {
		method, ok := want[d.Range.Start.Line]
		if d.Code != dsl.CodeGoName || !ok || !strings.Contains(d.Message, "becomes the method "+method+" of the Go interface ConvertHandlers") ||
			!strings.Contains(d.Message, "go vet reserves") {
			t.Errorf("unexpected diagnostic: %v", d)
			continue
		}
		delete(want, d.Range.Start.Line)
	}
	if len(want) > 0 {
		t.Errorf("no diagnostic for the methods %v", want)
	}

	// A plan built by other means: compiled with another name, then
	// renamed.
	pkg, diags := compiler.Compile([]dsl.Source{{Name: "one.ff", Data: []byte("package convert\ntype Doc { id: string }\nflow convert(Doc) -> Doc { exec step(Doc) -> Doc {} }\n")}})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	fl := &pkg.Flows[0]
	fl.Execs[0].Name, fl.Result = "marshal_json", "marshal_json"
	_, err := Generate(pkg, Options{})
	if err == nil || !strings.Contains(err.Error(), `flow "convert": exec "marshal_json" becomes the method MarshalJSON of ConvertHandlers, a name go vet reserves for MarshalJSON() ([]byte, error)`) {
		t.Errorf("Generate of a plan with an exec marshal_json: %v", err)
	}
}
