//! An SVG backend that needs no font: the SVG holds text as `<text>` elements the viewer renders,
//! and plotters asks the font only to size labels for the layout. Without a loaded font that
//! sizing fails, so this wrapper estimates it (DejaVu Sans averages about 0.6 em per character).

use plotters::prelude::SVGBackend;
use plotters_backend::{BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind};

/// [`SVGBackend`] with estimated text extents.
pub struct FontlessSvg<'a>(pub SVGBackend<'a>);

type Res<'a> = Result<(), DrawingErrorKind<<SVGBackend<'a> as DrawingBackend>::ErrorType>>;

impl<'a> DrawingBackend for FontlessSvg<'a> {
    type ErrorType = <SVGBackend<'a> as DrawingBackend>::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.0.get_size()
    }
    fn ensure_prepared(&mut self) -> Res<'a> {
        self.0.ensure_prepared()
    }
    fn present(&mut self) -> Res<'a> {
        self.0.present()
    }
    fn draw_pixel(&mut self, point: BackendCoord, color: BackendColor) -> Res<'a> {
        self.0.draw_pixel(point, color)
    }
    fn draw_line<S: BackendStyle>(&mut self, from: BackendCoord, to: BackendCoord, style: &S) -> Res<'a> {
        self.0.draw_line(from, to, style)
    }
    fn draw_rect<S: BackendStyle>(&mut self, ul: BackendCoord, br: BackendCoord, style: &S, fill: bool) -> Res<'a> {
        self.0.draw_rect(ul, br, style, fill)
    }
    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(&mut self, path: I, style: &S) -> Res<'a> {
        self.0.draw_path(path, style)
    }
    fn draw_circle<S: BackendStyle>(&mut self, c: BackendCoord, r: u32, style: &S, fill: bool) -> Res<'a> {
        self.0.draw_circle(c, r, style, fill)
    }
    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(&mut self, vert: I, style: &S) -> Res<'a> {
        self.0.fill_polygon(vert, style)
    }
    fn draw_text<T: BackendTextStyle>(&mut self, text: &str, style: &T, pos: BackendCoord) -> Res<'a> {
        self.0.draw_text(text, style, pos)
    }
    fn estimate_text_size<T: BackendTextStyle>(
        &self,
        text: &str,
        style: &T,
    ) -> Result<(u32, u32), DrawingErrorKind<Self::ErrorType>> {
        let em = style.size().max(1.0);
        let w = (text.chars().count() as f64 * em * 0.6).ceil() as u32;
        Ok((w, em.ceil() as u32))
    }
    fn blit_bitmap(&mut self, pos: BackendCoord, size: (u32, u32), src: &[u8]) -> Res<'a> {
        self.0.blit_bitmap(pos, size, src)
    }
}
