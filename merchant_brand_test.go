package agentpay

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBrandColors: the text on a brand colour is whichever of white and
// black contrasts more, at least 4.5:1; links on the white card take the
// brand colour only where it reaches 4.5:1 there. The greys around the
// 4.5:1 line on white (#767676 passes at 4.54, #777777 fails at 4.48:
// WebAIM's figures) pin the threshold.
func TestBrandColors(t *testing.T) {
	for _, tc := range []struct {
		color, background, text, link string
		contrast                      float64 // 0: not checked
		err                           string
	}{
		{color: "#4f46e5", background: "#4f46e5", text: BrandTextLight, link: "#4f46e5"},
		{color: "#ABCDEF", background: "#abcdef", text: BrandTextDark, link: PageText},
		{color: "#000000", background: "#000000", text: BrandTextLight, link: "#000000", contrast: 21},
		{color: "#ffffff", background: "#ffffff", text: BrandTextDark, link: PageText, contrast: 21},
		{color: "#ffff00", background: "#ffff00", text: BrandTextDark, link: PageText},
		// Pure red: white text only 4.00:1, black 5.25:1.
		{color: "#ff0000", background: "#ff0000", text: BrandTextDark, link: PageText, contrast: 5.25},
		{color: "#767676", background: "#767676", text: BrandTextDark, link: "#767676"},
		{color: "#777777", background: "#777777", text: BrandTextDark, link: PageText},
		{color: "#fff", err: "brand_color: must be a hex color of the form #rrggbb"},
		{color: "red", err: "brand_color: must be a hex color of the form #rrggbb"},
		{color: "#gg0000", err: "brand_color: must be a hex color of the form #rrggbb"},
		{color: "", err: "brand_color: must be a hex color of the form #rrggbb"},
	} {
		t.Run(tc.color, func(t *testing.T) {
			got, err := BrandColorsFor(tc.color)
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				require.True(t, IsValidation(err))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.background, got.Background)
			require.Equal(t, tc.text, got.Text)
			require.Equal(t, tc.link, got.Link)
			require.GreaterOrEqual(t, got.Contrast, MinBrandContrast)
			require.InDelta(t, ContrastRatio(got.Background, got.Text), got.Contrast, 1e-9)
			if tc.contrast != 0 {
				require.InDelta(t, tc.contrast, got.Contrast, 0.01)
			}
		})
	}
	require.InDelta(t, 4.54, ContrastRatio("#767676", PageCard), 0.005)
	require.InDelta(t, 4.48, ContrastRatio("#777777", PageCard), 0.005)
	require.InDelta(t, ContrastRatio("#123456", "#fedcba"), ContrastRatio("#fedcba", "#123456"), 1e-12, "symmetric")

	// Every colour (the cube in steps of 3, both ends included) gets text
	// of at least 4.5:1, and links readable on the card: no colour needs
	// refusing.
	least := 21.0
	for r := 0; r <= 255; r += 3 {
		for g := 0; g <= 255; g += 3 {
			for b := 0; b <= 255; b += 3 {
				c := fmt.Sprintf("#%02x%02x%02x", r, g, b)
				got, err := BrandColorsFor(c)
				require.NoError(t, err)
				require.GreaterOrEqual(t, got.Contrast, MinBrandContrast, c)
				require.GreaterOrEqual(t, ContrastRatio(got.Link, PageCard), MinBrandContrast, c)
				least = min(least, got.Contrast)
			}
		}
	}
	require.Greater(t, least, 4.58, "the worst case of the better of white and black")
}
