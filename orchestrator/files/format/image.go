package format

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"path"
	"strings"

	"github.com/HugoSmits86/nativewebp"
	"golang.org/x/image/draw"
	_ "golang.org/x/image/webp" // registers the WebP decoder

	"github.com/filepath-dev/filepath/orchestrator"
	"github.com/filepath-dev/filepath/orchestrator/files"
)

// Images with the standard library (PNG, JPEG, GIF decode; PNG, JPEG
// encode), golang.org/x/image (WebP decode, and draw's resampling
// kernels) and github.com/HugoSmits86/nativewebp (a dependency-free,
// pure-Go WebP encoder; lossless only, so a WebP is larger than a lossy
// one would be). Every decode reads the header first and refuses more
// than MaxPixels.

// ImageInfo is image_info's answer (read from the header alone).
type ImageInfo struct {
	ID         string  `json:"id"`
	Format     string  `json:"format" jsonschema_description:"png, jpeg, gif or webp"`
	Width      int     `json:"width"`
	Height     int     `json:"height"`
	Megapixels float64 `json:"megapixels"`
	ColorModel string  `json:"color_model" jsonschema_description:"rgba, rgb, gray, paletted, cmyk, ycbcr"`
	Size       int64   `json:"size" jsonschema_description:"bytes"`
	Hash       string  `json:"hash"`
}

// imageHeader reads an image's format and size from its header.
func imageHeader(p string, data []byte) (image.Config, string, error) {
	cfg, fmtName, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		if err == image.ErrFormat {
			return cfg, "", orchestrator.Errorf(orchestrator.EUnsupportedMedia, "%s is not an image the image tools read (PNG, JPEG, GIF or WebP)", p)
		}
		return cfg, "", malformed(p, fmtName+" image", err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return cfg, "", orchestrator.Errorf(orchestrator.EInvalid, "%s is an image of %dx%d pixels: nothing to show", p, cfg.Width, cfg.Height)
	}
	if int64(cfg.Width)*int64(cfg.Height) > MaxPixels {
		return cfg, "", orchestrator.Errorf(orchestrator.EInvalid, "%s is %dx%d pixels (%.0f megapixels); the image tools decode at most %d megapixels",
			p, cfg.Width, cfg.Height, float64(cfg.Width)*float64(cfg.Height)/1e6, MaxPixels/1_000_000)
	}
	return cfg, fmtName, nil
}

func colorModel(m color.Model) string {
	switch m {
	case color.RGBAModel, color.NRGBAModel, color.RGBA64Model, color.NRGBA64Model:
		return "rgba"
	case color.GrayModel, color.Gray16Model:
		return "gray"
	case color.CMYKModel:
		return "cmyk"
	case color.YCbCrModel, color.NYCbCrAModel:
		return "ycbcr"
	}
	if _, ok := m.(color.Palette); ok {
		return "paletted"
	}
	return "rgb"
}

// decoded is a decoded image as the cache keeps it.
type decoded struct {
	img    image.Image
	format string
}

// decode returns src decoded (bounded), from the cache when current.
func (t *tier) decode(ctx context.Context, src source) (decoded, error) {
	if _, _, err := imageHeader(src.path, src.data); err != nil {
		return decoded{}, err
	}
	v, err := t.s.Cache().Parsed(src.key, src.info.Gen, "image", func() (any, int64, error) {
		d, err := guard(ctx, func() (decoded, error) {
			img, f, err := image.Decode(bytes.NewReader(src.data))
			return decoded{img, f}, err
		})
		if err != nil {
			return nil, 0, malformed(src.path, "image", err)
		}
		b := d.img.Bounds()
		return d, int64(b.Dx()) * int64(b.Dy()) * 4, nil
	})
	if err != nil {
		return decoded{}, err
	}
	return v.(decoded), nil
}

// fitSize is the size of an image of w x h fitted into mw x mh keeping
// its aspect (never enlarged).
func fitSize(w, h, mw, mh int) (int, int) {
	if w <= mw && h <= mh {
		return w, h
	}
	if w*mh > h*mw { // wider than the box
		return mw, max(1, h*mw/w)
	}
	return max(1, w*mh/h), mh
}

// scale resamples img to w x h (into RGBA: x/image/draw's fast paths
// write only that; any other destination costs an allocation a pixel).
func scale(img image.Image, w, h int, q draw.Interpolator) *image.RGBA {
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	q.Scale(dst, dst.Bounds(), img, img.Bounds(), draw.Src, nil)
	return dst
}

// encode writes img as format (png, jpeg, webp).
func encode(img image.Image, format string, quality int) ([]byte, string, error) {
	var buf bytes.Buffer
	var err error
	mime := ""
	switch format {
	case "png":
		mime, err = "image/png", (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&buf, img)
	case "jpeg", "jpg":
		if quality == 0 {
			quality = 85
		}
		mime, err = "image/jpeg", jpeg.Encode(&buf, img, &jpeg.Options{Quality: quality})
	case "webp":
		mime, err = "image/webp", nativewebp.Encode(&buf, img, nil)
	default:
		return nil, "", orchestrator.FieldErrorf("format", "format is png, jpeg or webp, not %q", format)
	}
	return buf.Bytes(), mime, err
}

// formatOf is the output format of a file named p (by its extension; a
// name without a known one: png).
func formatOf(p, fallback string) string {
	switch strings.ToLower(path.Ext(p)) {
	case ".jpg", ".jpeg":
		return "jpeg"
	case ".png":
		return "png"
	case ".webp":
		return "webp"
	}
	if fallback == "gif" || fallback == "" {
		return "png"
	}
	return fallback
}

// Arguments of the image tools.
type (
	ResizeArgs struct {
		FileID
		Width  int    `json:"width,omitempty" jsonschema_description:"the width in pixels (0 or omitted: from height, keeping the aspect)"`
		Height int    `json:"height,omitempty" jsonschema_description:"the height in pixels (0 or omitted: from width, keeping the aspect)"`
		Fit    string `json:"fit,omitempty" jsonschema:"enum=cover,enum=contain,enum=fill" jsonschema_description:"cover: fill the box, cropping the overflow (default); contain: fit inside it, keeping the aspect; fill: stretch to it"`
		Output string `json:"output,omitempty" jsonschema_description:"write the result here (default: in place)"`
		IfMatch
	}
	CropArgs struct {
		FileID
		Left   int    `json:"left"`
		Top    int    `json:"top"`
		Width  int    `json:"width"`
		Height int    `json:"height"`
		Output string `json:"output,omitempty" jsonschema_description:"write the result here (default: in place)"`
		IfMatch
	}
	RotateArgs struct {
		FileID
		Degrees int    `json:"degrees" jsonschema_description:"clockwise: 90, 180 or 270"`
		Output  string `json:"output,omitempty" jsonschema_description:"write the result here (default: in place)"`
		IfMatch
	}
	CompositeArgs struct {
		FileID
		Overlay string  `json:"overlay" jsonschema_description:"the image laid over it (its path in the workspace); its transparency is kept"`
		Left    int     `json:"left,omitempty" jsonschema_description:"where the overlay's top-left corner goes, in pixels from the left (may be negative: the overlay is clipped)"`
		Top     int     `json:"top,omitempty" jsonschema_description:"... and from the top"`
		Opacity float64 `json:"opacity,omitempty" jsonschema_description:"the overlay's opacity, 0 to 1 (default 1)"`
		Output  string  `json:"output,omitempty" jsonschema_description:"write the result here (default: in place)"`
		IfMatch
	}
	ConvertArgs struct {
		FileID
		Format  string `json:"format" jsonschema:"enum=png,enum=jpeg,enum=webp"`
		Output  string `json:"output,omitempty" jsonschema_description:"the new file (default: the same name with the format's extension)"`
		Quality int    `json:"quality,omitempty" jsonschema_description:"JPEG quality 1-100 (default 85); WebP is lossless"`
	}
	Base64Args struct {
		FileID
		MaxWidth  int    `json:"max_width,omitempty" jsonschema_description:"at most this wide (default 1024, at most 2048); the aspect is kept"`
		MaxHeight int    `json:"max_height,omitempty" jsonschema_description:"at most this high (default 1024, at most 2048)"`
		Format    string `json:"format,omitempty" jsonschema:"enum=png,enum=jpeg" jsonschema_description:"default: jpeg for a photo (no transparency), png otherwise"`
	}
)

// ImageBase64 is image_to_base64's answer.
type ImageBase64 struct {
	ID       string `json:"id"`
	MimeType string `json:"mime_type"`
	Width    int    `json:"width"`
	Height   int    `json:"height"`
	Data     string `json:"data" jsonschema_description:"the encoded image, base64"`
}

func (r ImageBase64) AuditSummary() any {
	return map[string]any{"mime_type": r.MimeType, "width": r.Width, "height": r.Height, "bytes": len(r.Data)}
}

const maxBase64Side = 2048

// opaque reports whether img has no transparent pixel worth keeping.
func opaque(img image.Image) bool {
	if o, ok := img.(interface{ Opaque() bool }); ok {
		return o.Opaque()
	}
	return false
}

// imageEdit decodes file id, transforms it and writes the result (in
// place, or to output) in the output's format.
func (t *tier) imageEdit(ctx context.Context, c files.Caller, id, out, ifMatch string, quality int, format string, fn func(img image.Image) (image.Image, error)) (Edited, error) {
	src, err := t.read(ctx, c, "id", id)
	if err != nil {
		return Edited{}, err
	}
	if err := src.checkIfMatch(ifMatch); err != nil {
		return Edited{}, err
	}
	dst, derived, err := output("output", out, src.path)
	if err != nil {
		return Edited{}, err
	}
	d, err := t.decode(ctx, src)
	if err != nil {
		return Edited{}, err
	}
	res, err := fn(d.img)
	if err != nil {
		return Edited{}, err
	}
	if format == "" {
		format = formatOf(dst, d.format)
	}
	data, err := guard(ctx, func() ([]byte, error) {
		b, _, err := encode(res, format, quality)
		return b, err
	})
	if err != nil {
		return Edited{}, err
	}
	im := ""
	if dst == src.path {
		im = src.info.Hash
	}
	return t.write(ctx, c, dst, data, im, derived)
}

func checkSide(field string, v int) error {
	if v < 0 || v > 16384 {
		return orchestrator.FieldErrorf(field, "%s must be 0 to 16384 pixels", field)
	}
	return nil
}

// resize makes img w x h by fit.
func resize(img image.Image, w, h int, fit string) (image.Image, error) {
	b := img.Bounds()
	if err := checkSide("width", w); err != nil {
		return nil, err
	}
	if err := checkSide("height", h); err != nil {
		return nil, err
	}
	switch {
	case w == 0 && h == 0:
		return nil, orchestrator.FieldErrorf("width", "give width, height or both")
	case w == 0:
		w, fit = max(1, b.Dx()*h/b.Dy()), "fill"
	case h == 0:
		h, fit = max(1, b.Dy()*w/b.Dx()), "fill"
	}
	if int64(w)*int64(h) > MaxPixels {
		return nil, orchestrator.FieldErrorf("width", "%dx%d is more than %d megapixels", w, h, MaxPixels/1_000_000)
	}
	switch fit {
	case "fill":
		return scale(img, w, h, draw.CatmullRom), nil
	case "contain":
		cw, ch := w, h
		if b.Dx()*h > b.Dy()*w {
			ch = max(1, b.Dy()*w/b.Dx())
		} else {
			cw = max(1, b.Dx()*h/b.Dy())
		}
		return scale(img, cw, ch, draw.CatmullRom), nil
	case "", "cover":
		// scale so the box is covered, then crop the middle
		sw, sh := w, h
		if b.Dx()*h > b.Dy()*w {
			sw = max(w, b.Dx()*h/b.Dy())
		} else {
			sh = max(h, b.Dy()*w/b.Dx())
		}
		s := scale(img, sw, sh, draw.CatmullRom)
		x0, y0 := (sw-w)/2, (sh-h)/2
		return s.SubImage(image.Rect(x0, y0, x0+w, y0+h)), nil
	}
	return nil, orchestrator.FieldErrorf("fit", "fit is cover, contain or fill, not %q", fit)
}

// composite is base with top drawn over it at (left, top), top's alpha
// scaled by opacity (0 < opacity <= 1).
func composite(base, top image.Image, left, topY int, opacity float64) image.Image {
	b := base.Bounds()
	dst := image.NewNRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	draw.Draw(dst, dst.Bounds(), base, b.Min, draw.Src)
	r := image.Rect(left, topY, left+top.Bounds().Dx(), topY+top.Bounds().Dy())
	var mask image.Image
	if opacity < 1 {
		mask = image.NewUniform(color.Alpha{A: uint8(opacity*255 + 0.5)})
	}
	draw.DrawMask(dst, r, top, top.Bounds().Min, mask, image.Point{}, draw.Over)
	return dst
}

// rotate turns img clockwise by deg (90, 180, 270).
func rotate(img image.Image, deg int) (image.Image, error) {
	deg = ((deg % 360) + 360) % 360
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	var dst *image.NRGBA
	switch deg {
	case 0:
		return img, nil
	case 90, 270:
		dst = image.NewNRGBA(image.Rect(0, 0, h, w))
	case 180:
		dst = image.NewNRGBA(image.Rect(0, 0, w, h))
	default:
		return nil, orchestrator.FieldErrorf("degrees", "degrees is 90, 180 or 270")
	}
	for y := range h {
		for x := range w {
			c := img.At(b.Min.X+x, b.Min.Y+y)
			switch deg {
			case 90:
				dst.Set(h-1-y, x, c)
			case 180:
				dst.Set(w-1-x, h-1-y, c)
			case 270:
				dst.Set(y, w-1-x, c)
			}
		}
	}
	return dst, nil
}

func (t *tier) imageTools() []files.Tool {
	return []files.Tool{
		files.Define("image_info", "Facts of an image from its header: format, width, height, color model, size.", true,
			func(ctx context.Context, c files.Caller, in FileID) (ImageInfo, error) {
				src, err := t.read(ctx, c, "id", in.ID)
				if err != nil {
					return ImageInfo{}, err
				}
				cfg, f, err := imageHeader(src.path, src.data)
				if err != nil {
					return ImageInfo{}, err
				}
				return ImageInfo{ID: src.path, Format: f, Width: cfg.Width, Height: cfg.Height, ColorModel: colorModel(cfg.ColorModel),
					Megapixels: round2(float64(cfg.Width) * float64(cfg.Height) / 1e6), Size: src.info.Size, Hash: src.info.Hash}, nil
			}).WithRoute("image_info"),
		files.Define("image_resize", "Resize an image to width x height: fit cover (fill the box, crop the overflow), contain (fit inside) or fill (stretch); one side 0 keeps the aspect. In place or into output. With if_match, only if the file still has that hash.", false,
			func(ctx context.Context, c files.Caller, in ResizeArgs) (Edited, error) {
				return t.imageEdit(ctx, c, in.ID, in.Output, in.IfMatch.IfMatch, 0, "", func(img image.Image) (image.Image, error) {
					return resize(img, in.Width, in.Height, in.Fit)
				})
			}).WithRoute("image_resize"),
		files.Define("image_crop", "Crop an image to the rectangle left, top, width, height (pixels). In place or into output. With if_match, only if the file still has that hash.", false,
			func(ctx context.Context, c files.Caller, in CropArgs) (Edited, error) {
				return t.imageEdit(ctx, c, in.ID, in.Output, in.IfMatch.IfMatch, 0, "", func(img image.Image) (image.Image, error) {
					b := img.Bounds()
					r := image.Rect(in.Left, in.Top, in.Left+in.Width, in.Top+in.Height).Add(b.Min)
					if in.Width <= 0 || in.Height <= 0 || in.Left < 0 || in.Top < 0 || !r.In(b) {
						return nil, orchestrator.FieldErrorf("width", "the crop %dx%d at (%d,%d) is not within the image's %dx%d pixels", in.Width, in.Height, in.Left, in.Top, b.Dx(), b.Dy())
					}
					dst := image.NewNRGBA(image.Rect(0, 0, in.Width, in.Height))
					draw.Draw(dst, dst.Bounds(), img, r.Min, draw.Src)
					return dst, nil
				})
			}).WithRoute("image_crop"),
		files.Define("image_rotate", "Rotate an image clockwise by 90, 180 or 270 degrees. In place or into output. With if_match, only if the file still has that hash.", false,
			func(ctx context.Context, c files.Caller, in RotateArgs) (Edited, error) {
				return t.imageEdit(ctx, c, in.ID, in.Output, in.IfMatch.IfMatch, 0, "", func(img image.Image) (image.Image, error) {
					return rotate(img, in.Degrees)
				})
			}).WithRoute("image_rotate"),
		files.Define("image_composite", "Lay one image (overlay) over another at left, top, with an opacity; the overlay's transparency is kept and what falls outside is clipped. In place or into output. With if_match, only if the file still has that hash.", false,
			func(ctx context.Context, c files.Caller, in CompositeArgs) (Edited, error) {
				if in.Opacity < 0 || in.Opacity > 1 {
					return Edited{}, orchestrator.FieldErrorf("opacity", "opacity is 0 to 1, not %g", in.Opacity)
				}
				ov, err := t.read(ctx, c, "overlay", in.Overlay)
				if err != nil {
					return Edited{}, err
				}
				top, err := t.decode(ctx, ov)
				if err != nil {
					return Edited{}, err
				}
				return t.imageEdit(ctx, c, in.ID, in.Output, in.IfMatch.IfMatch, 0, "", func(img image.Image) (image.Image, error) {
					return composite(img, top.img, in.Left, in.Top, cmp.Or(in.Opacity, 1)), nil
				})
			}).WithRoute("image_composite"),
		files.Define("image_convert", "Convert an image to PNG, JPEG or WebP (lossless) as a new file: output, or the same name with the format's extension (its source is derived).", false,
			func(ctx context.Context, c files.Caller, in ConvertArgs) (Edited, error) {
				f := strings.ToLower(in.Format)
				if f == "jpg" {
					f = "jpeg"
				}
				if f != "png" && f != "jpeg" && f != "webp" {
					return Edited{}, orchestrator.FieldErrorf("format", "format is png, jpeg or webp, not %q", in.Format)
				}
				if in.Quality < 0 || in.Quality > 100 {
					return Edited{}, orchestrator.FieldErrorf("quality", "quality is 1 to 100")
				}
				out := in.Output
				if out == "" {
					p, err := files.CleanID("id", in.ID)
					if err != nil {
						return Edited{}, err
					}
					out = withExt(p, map[string]string{"png": ".png", "jpeg": ".jpg", "webp": ".webp"}[f])
				}
				e, err := t.imageEdit(ctx, c, in.ID, out, "", in.Quality, f, func(img image.Image) (image.Image, error) { return img, nil })
				return e, err
			}).WithRoute("image_convert"),
		files.Define("image_to_base64", "An image as base64, scaled to fit max_width x max_height (default 1024, at most 2048), for a vision model or a page.", true,
			func(ctx context.Context, c files.Caller, in Base64Args) (ImageBase64, error) {
				if in.MaxWidth < 0 || in.MaxWidth > maxBase64Side || in.MaxHeight < 0 || in.MaxHeight > maxBase64Side {
					return ImageBase64{}, orchestrator.FieldErrorf("max_width", "max_width and max_height are 1 to %d", maxBase64Side)
				}
				mw, mh := cmpOr(in.MaxWidth, 1024), cmpOr(in.MaxHeight, 1024)
				src, err := t.read(ctx, c, "id", in.ID)
				if err != nil {
					return ImageBase64{}, err
				}
				d, err := t.decode(ctx, src)
				if err != nil {
					return ImageBase64{}, err
				}
				img := d.img
				b := img.Bounds()
				w, h := fitSize(b.Dx(), b.Dy(), mw, mh)
				if w != b.Dx() || h != b.Dy() {
					img = scale(img, w, h, draw.ApproxBiLinear)
				}
				f := in.Format
				switch f {
				case "":
					f = "png"
					if opaque(img) {
						f = "jpeg"
					}
				case "png", "jpeg":
				default:
					return ImageBase64{}, orchestrator.FieldErrorf("format", "format is png or jpeg")
				}
				data, mime, err := encode(img, f, 85)
				if err != nil {
					return ImageBase64{}, fmt.Errorf("encode %s: %w", src.path, err)
				}
				return ImageBase64{ID: src.path, MimeType: mime, Width: w, Height: h, Data: base64.StdEncoding.EncodeToString(data)}, nil
			}),
	}
}

func cmpOr(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}
