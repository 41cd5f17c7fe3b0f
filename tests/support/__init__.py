"""What the tests share: fakes of every external service, page and site generators, fixtures, helpers."""
