package kolibri_test

import (
	"fmt"
	"log"

	"kolibri.dev/kolibri"
)

// Greedy generation from a prompt; errors end the program for brevity.
func Example() {
	model, err := kolibri.LoadModel("model.gguf", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer model.Close()
	ctx, err := kolibri.NewContext(model, &kolibri.ContextOptions{NCtx: 512})
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()
	params := kolibri.DefaultSamplerParams()
	params.Temperature = 0 // greedy
	sampler, err := kolibri.NewSampler(&params)
	if err != nil {
		log.Fatal(err)
	}
	defer sampler.Close()

	tokens, err := model.Tokenize("The capital of France is", true, false)
	if err != nil {
		log.Fatal(err)
	}
	var text []byte
	for i := 0; i < 32; i++ {
		if err := ctx.Eval(tokens); err != nil {
			log.Fatal(err)
		}
		tok, err := sampler.Sample(ctx)
		if err != nil {
			log.Fatal(err)
		}
		if eog, _ := model.IsEOG(tok); eog {
			break
		}
		piece, err := model.TokenToPiece(tok, false)
		if err != nil {
			log.Fatal(err)
		}
		text = append(text, piece...) // pieces may split a UTF-8 character: join, then print
		tokens = []kolibri.Token{tok}
	}
	fmt.Println(string(text))
}
