package agentpay

import (
	"math"
	"strconv"
	"strings"
)

// A merchant's brand colour fills the hosted page's buttons and bars, with
// text on them, and may colour its links on the page's white card. Which
// text colour goes on it, and whether it may colour links, is decided here
// once: the hosted page (web) draws with the answer, and the dashboard's
// preview asks for it (GraphQL brandColors) as the merchant picks, so what
// the merchant sees is what customers get.
//
// Text on the brand colour is white or black, whichever contrasts more
// (WCAG 2's contrast ratio of relative luminances). One of the two always
// reaches MinBrandContrast (4.5:1, WCAG AA for body text): the worst case,
// a colour whose luminance sits where both are equal, still gives 4.58:1
// (TestBrandColors sweeps the colour cube), so no colour needs refusing for
// its buttons. Links on the white card take the brand colour only where it
// reaches 4.5:1 on white, else the page's dark text colour.
const (
	// BrandTextLight and BrandTextDark are the two text colours a brand
	// colour may carry.
	BrandTextLight = "#ffffff"
	BrandTextDark  = "#000000"
	// PageCard is the hosted page's card (links sit on it) and PageText
	// its text colour, which links take when the brand colour is too light.
	PageCard = "#ffffff"
	PageText = "#111827"
	// MinBrandContrast is the least contrast ratio of text the brand
	// colour touches.
	MinBrandContrast = 4.5
)

// BrandColors is a brand colour and the colours drawn with it.
type BrandColors struct {
	// Background is the brand colour, #rrggbb in lower case.
	Background string
	// Text is the text on Background: BrandTextLight or BrandTextDark.
	Text string
	// Contrast is the contrast ratio of Text on Background (1 to 21).
	Contrast float64
	// Link is the colour of links on the page's card: Background when
	// readable there, else PageText.
	Link string
}

// BrandColorsFor answers the colours for the brand colour c (#rrggbb), or
// a ValidationError on brand_color for anything else.
func BrandColorsFor(c string) (BrandColors, error) {
	if !isHexColor(c) {
		return BrandColors{}, Invalid("brand_color", "must be a hex color of the form #rrggbb")
	}
	c = strings.ToLower(c)
	light, dark := ContrastRatio(c, BrandTextLight), ContrastRatio(c, BrandTextDark)
	out := BrandColors{Background: c, Text: BrandTextLight, Contrast: light, Link: c}
	if dark > light {
		out.Text, out.Contrast = BrandTextDark, dark
	}
	if ContrastRatio(c, PageCard) < MinBrandContrast {
		out.Link = PageText
	}
	return out, nil
}

// ContrastRatio is WCAG 2's contrast ratio of two #rrggbb colours:
// (L1 + 0.05) / (L2 + 0.05), L1 the lighter's relative luminance.
func ContrastRatio(a, b string) float64 {
	la, lb := luminance(a), luminance(b)
	if la < lb {
		la, lb = lb, la
	}
	return (la + 0.05) / (lb + 0.05)
}

// luminance is the relative luminance of #rrggbb (sRGB, WCAG 2).
func luminance(c string) float64 {
	channel := func(hex string) float64 {
		v, _ := strconv.ParseUint(hex, 16, 8)
		s := float64(v) / 255
		if s <= 0.04045 {
			return s / 12.92
		}
		return math.Pow((s+0.055)/1.055, 2.4)
	}
	return 0.2126*channel(c[1:3]) + 0.7152*channel(c[3:5]) + 0.0722*channel(c[5:7])
}
