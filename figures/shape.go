package figures

import (
	"strconv"
	"strings"
)

// maxImageSide bounds each side of an image shape, so that H*W cannot overflow.
const maxImageSide = 1 << 24

// ParseImageShape parses an image shape written "HxW" (height by width, e.g. "28x28"), the
// form of node's --image-shape flag. Both must be integers >= 1. Errors wrap ErrInput.
func ParseImageShape(s string) ([2]int, error) {
	hs, ws, ok := strings.Cut(s, "x")
	if !ok {
		return [2]int{}, inputErrorf("image shape %q: want HxW, e.g. 28x28", s)
	}
	var shape [2]int
	for i, part := range []string{hs, ws} {
		v, err := strconv.Atoi(part)
		if err != nil || v < 1 || v > maxImageSide {
			return [2]int{}, inputErrorf("image shape %q: want HxW with integers H, W >= 1, e.g. 28x28", s)
		}
		shape[i] = v
	}
	return shape, nil
}

// CheckImageShape reports whether images of shape {H, W} have m pixels. Errors wrap ErrInput.
func CheckImageShape(shape [2]int, m int) error {
	h, w := shape[0], shape[1]
	if h < 1 || w < 1 || h > maxImageSide || w > maxImageSide {
		return inputErrorf("image shape %dx%d: want H, W >= 1", h, w)
	}
	if h*w != m {
		return inputErrorf("image shape %dx%d has %d pixels, but the basis has %d features", h, w, h*w, m)
	}
	return nil
}
