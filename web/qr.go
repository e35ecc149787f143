package web

import (
	"fmt"
	"strings"

	qrcode "github.com/skip2/go-qrcode"
)

// qrQuietZone is the light border around a QR code, in modules (ISO/IEC
// 18004 asks for 4).
const qrQuietZone = 4

// QRMatrix encodes text as a QR code (error correction M) and answers its
// modules without the quiet zone: true is dark. The matrix is square, with
// 17+4*version modules a side.
func QRMatrix(text string) ([][]bool, error) {
	q, err := qrcode.New(text, qrcode.Medium)
	if err != nil {
		return nil, fmt.Errorf("qr code: %w", err)
	}
	q.DisableBorder = true
	return q.Bitmap(), nil
}

// QRSVG renders text as a QR code in SVG: one unit per module, a quiet zone
// of 4 modules, dark modules as one path of horizontal runs. The output
// depends only on text, so it is cacheable and comparable byte for byte.
func QRSVG(text string) (string, error) {
	m, err := QRMatrix(text)
	if err != nil {
		return "", err
	}
	return qrSVG(m), nil
}

func qrSVG(m [][]bool) string {
	n := len(m)
	size := n + 2*qrQuietZone
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" shape-rendering="crispEdges" role="img" aria-label="QR code" data-modules="%d">`,
		size, size, size*6, size*6, n)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#fff"/><path fill="#000" d="`, size, size)
	for y, row := range m {
		for x := 0; x < n; {
			if !row[x] {
				x++
				continue
			}
			start := x
			for x < n && row[x] {
				x++
			}
			fmt.Fprintf(&b, "M%d %dh%dv1h-%dz", start+qrQuietZone, y+qrQuietZone, x-start, x-start)
		}
	}
	b.WriteString(`"/></svg>`)
	return b.String()
}
