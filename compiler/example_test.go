package compiler_test

import (
	"fmt"
	"os"

	"github.com/flowfabric/ff/compiler"
	"github.com/flowfabric/ff/dsl"
)

func ExampleCompile() {
	src := `
flow greet(string) -> string {
  exec hello(string) -> string { retry { attempts 3 } }
  exec shout(strng) -> string {}
  hello -> shout
}`
	pkg, diags := compiler.Compile([]dsl.Source{{Name: "greet.ff", Data: []byte(src)}})
	fmt.Println("plan:", pkg != nil)
	_ = diags.Format(os.Stdout)

	pkg, _ = compiler.Compile([]dsl.Source{{Name: "greet.ff", Data: []byte(`
flow greet(string) -> string {
  exec hello(string) -> string { retry { attempts 3 } }
}`)}})
	x := pkg.Flows[0].Execs[0]
	fmt.Println(x.Kind, x.InputFrom, x.Retry.Attempts, pkg.Flows[0].Result)
	// Output:
	// plan: false
	// greet.ff:4:14: error: unknown type "strng"; did you mean "string"?
	// greet.hello flow 3 hello
}
