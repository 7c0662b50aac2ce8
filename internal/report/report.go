// Package report turns experiment results into what people read: CSV files, markdown tables and
// plots (PNG and SVG, drawn with gonum/plot). Experiments produce a Table of rows; the same table
// feeds the CSV, the markdown and the charts, so the three never disagree.
package report

import (
	"encoding/csv"
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Table is a rectangular result: column names and rows of cells.
type Table struct {
	Columns []string
	Rows    [][]string
}

// Add appends a row; values are formatted with Cell.
func (t *Table) Add(vals ...any) {
	row := make([]string, len(vals))
	for i, v := range vals {
		row[i] = Cell(v)
	}
	t.Rows = append(t.Rows, row)
}

// Cell formats one value: floats with up to 3 decimals, the rest with %v.
func Cell(v any) string {
	switch x := v.(type) {
	case float64:
		return strconv.FormatFloat(x, 'f', 3, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'f', 3, 32)
	case string:
		return x
	}
	return fmt.Sprint(v)
}

// WriteCSV writes the table as CSV.
func (t *Table) WriteCSV(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write(t.Columns)
	_ = w.WriteAll(t.Rows)
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Markdown renders the table as a GitHub markdown table.
func (t *Table) Markdown() string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(t.Columns, " | ") + " |\n|")
	for range t.Columns {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range t.Rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	return b.String()
}

// Series is one line of a line chart.
type Series struct {
	Name string
	X, Y []float64
}

// Chart describes one plot.
type Chart struct {
	Title, XLabel, YLabel string
	LogY                  bool
}

// LineChart draws series as lines with points and saves base+".png" and base+".svg".
func LineChart(base string, c Chart, series []Series) error {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = c.Title, c.XLabel, c.YLabel
	if c.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	// The legend goes below the axes, not inside them: in any corner inside, some figure's lines
	// ran under it.
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	if c.LogY && !anyPositive(series) {
		// A log axis cannot show zeros; draw the (all non-positive) data on a linear axis.
		p.Y.Scale, p.Y.Tick.Marker = plot.LinearScale{}, plot.DefaultTicks{}
		p.Title.Text += " (no positive values: linear axis)"
		c.LogY = false
	}
	for i, s := range series {
		pts := make(plotter.XYs, 0, len(s.X))
		for j := range s.X {
			y := s.Y[j]
			if c.LogY && y <= 0 {
				continue // a log axis cannot show zero
			}
			pts = append(pts, plotter.XY{X: s.X[j], Y: y})
		}
		if len(pts) == 0 {
			legend.Add(s.Name + " (no data)")
			continue
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return fmt.Errorf("plot %s: %w", s.Name, err)
		}
		col := plotutil.Color(i)
		line.Color, points.Color = col, col
		points.Shape = plotutil.Shape(i)
		p.Add(line, points)
		legend.Add(s.Name, line, points)
	}
	return saveWithLegend(p, legend, base)
}

func anyPositive(series []Series) bool {
	for _, s := range series {
		for _, y := range s.Y {
			if y > 0 {
				return true
			}
		}
	}
	return false
}

// Bar is one bar of a bar chart.
type Bar struct {
	Label string
	Value float64
}

// BarChart draws one bar per label and saves base+".png" and base+".svg".
func BarChart(base string, c Chart, bars []Bar) error {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = c.Title, c.XLabel, c.YLabel
	vals := make(plotter.Values, len(bars))
	names := make([]string, len(bars))
	for i, b := range bars {
		vals[i], names[i] = b.Value, b.Label
	}
	bc, err := plotter.NewBarChart(vals, vg.Points(28))
	if err != nil {
		return fmt.Errorf("bar chart: %w", err)
	}
	bc.Color = color.RGBA{R: 52, G: 101, B: 164, A: 255}
	p.Add(bc)
	p.NominalX(names...)
	return save(p, base)
}

// The size of a chart's plot, axes and title; a legend below it adds to the height.
const chartWidth, chartHeight = 7 * vg.Inch, 4.5 * vg.Inch

func save(p *plot.Plot, base string) error {
	return saveWithLegend(p, plot.NewLegend(), base)
}

// saveWithLegend draws p with legend (if it has entries) in a strip of its own below it, and
// saves base+".png" and base+".svg".
func saveWithLegend(p *plot.Plot, legend plot.Legend, base string) error {
	if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
		return err
	}
	const margin = vg.Length(6)
	full := draw.Canvas{Rectangle: vg.Rectangle{Max: vg.Point{X: chartWidth, Y: chartHeight}}}
	strip := legend.Rectangle(full).Size().Y
	if strip > 0 {
		strip += 2 * margin
	}
	for _, ext := range []string{"png", "svg"} {
		c, err := draw.NewFormattedCanvas(chartWidth, chartHeight+strip, ext)
		if err != nil {
			return fmt.Errorf("save plot %s.%s: %w", base, ext, err)
		}
		dc := draw.New(c)
		if p.BackgroundColor != nil {
			dc.SetColor(p.BackgroundColor) // the legend's strip too
			dc.Fill(dc.Rectangle.Path())
		}
		p.Draw(draw.Crop(dc, 0, 0, strip, 0))
		if strip > 0 {
			legend.Draw(draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
				Min: vg.Point{X: margin, Y: margin}, Max: vg.Point{X: chartWidth - margin, Y: strip - margin}}})
		}
		if err := writeFile(base+"."+ext, c); err != nil {
			return fmt.Errorf("save plot %s.%s: %w", base, ext, err)
		}
	}
	return nil
}

func writeFile(path string, w io.WriterTo) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := w.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
