package bind

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/flowinput"
)

// benchOrder is the Go type ffc generates for benchOrderTypes' Order.
type benchOrder struct {
	ID       string            `json:"id"`
	Customer string            `json:"customer"`
	Cents    int64             `json:"cents"`
	Rate     float64           `json:"rate"`
	Paid     bool              `json:"paid"`
	At       time.Time         `json:"at"`
	Labels   map[string]string `json:"labels"`
	Lines    []benchLine       `json:"lines"`
	Note     *string           `json:"note,omitempty"`
}

type benchLine struct {
	SKU   string `json:"sku"`
	Qty   int64  `json:"qty"`
	Cents int64  `json:"cents"`
}

var benchOrderTypes = []plan.Type{
	{Name: "Order", Fields: []plan.Field{
		{Name: "id", Type: plan.TypeRef{Kind: plan.KindString}},
		{Name: "customer", Type: plan.TypeRef{Kind: plan.KindString}},
		{Name: "cents", Type: plan.TypeRef{Kind: plan.KindInt}},
		{Name: "rate", Type: plan.TypeRef{Kind: plan.KindFloat}},
		{Name: "paid", Type: plan.TypeRef{Kind: plan.KindBool}},
		{Name: "at", Type: plan.TypeRef{Kind: plan.KindTime}},
		{Name: "labels", Type: plan.TypeRef{Kind: plan.KindMap, Elem: &plan.TypeRef{Kind: plan.KindString}}},
		{Name: "lines", Type: plan.TypeRef{Kind: plan.KindList, Elem: &plan.TypeRef{Kind: plan.KindNamed, Name: "Line"}}},
		{Name: "note", Type: plan.TypeRef{Kind: plan.KindString}, Optional: true},
	}},
	{Name: "Line", Fields: []plan.Field{
		{Name: "sku", Type: plan.TypeRef{Kind: plan.KindString}},
		{Name: "qty", Type: plan.TypeRef{Kind: plan.KindInt}},
		{Name: "cents", Type: plan.TypeRef{Kind: plan.KindInt}},
	}},
}

// benchOrderJSON is an Order with lines line items, as a generated
// handler encodes it.
func benchOrderJSON(b *testing.B, lines int) []byte {
	note := "leave at the door"
	o := benchOrder{ID: "o-12345", Customer: "c-678", Cents: 129_99, Rate: 0.19, Paid: true,
		At: time.Date(2026, 11, 21, 19, 0, 0, 0, time.UTC), Labels: map[string]string{"channel": "web", "region": "eu"}, Note: &note}
	for i := range lines {
		o.Lines = append(o.Lines, benchLine{SKU: fmt.Sprintf("sku-%05d", i), Qty: int64(i%5 + 1), Cents: int64(100 * i)})
	}
	data, err := json.Marshal(o)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkDecode measures what a generated handler does with an input or
// an upstream output per task: json.Unmarshal alone (the binding before
// it checked values), the check alone, and both (the binding now), for an
// Order of 1 and of 100 line items; and, for comparison, the check by
// decoding the value as Flow does at staging.
func BenchmarkDecode(b *testing.B) {
	orderRef := &plan.TypeRef{Kind: plan.KindNamed, Name: "Order"}
	c, err := flowinput.NewTypes(benchOrderTypes).Checker(orderRef)
	if err != nil {
		b.Fatal(err)
	}
	fl := &plan.Flow{Name: "f", Input: orderRef, Types: benchOrderTypes}
	for _, lines := range []int{1, 100} {
		data := benchOrderJSON(b, lines)
		if err := c.Check("input", data); err != nil {
			b.Fatal(err)
		}
		name := fmt.Sprintf("lines=%d,bytes=%d", lines, len(data))
		b.Run(name+"/unmarshal", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				var o benchOrder
				if err := json.Unmarshal(data, &o); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/check", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if err := c.Check("input", data); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/check+unmarshal", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if err := c.Check("input", data); err != nil {
					b.Fatal(err)
				}
				var o benchOrder
				if err := json.Unmarshal(data, &o); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/flow-check", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if err := flowinput.Flow(fl, "input", data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
