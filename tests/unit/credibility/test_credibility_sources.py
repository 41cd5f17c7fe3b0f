"""Source typing on real URLs, metadata overrides and the rules file."""

from __future__ import annotations

from pathlib import Path

import pytest

from hifirag_core.credibility.source_types import (
    SOURCE_TYPES,
    SourceRulesError,
    classify_source,
    classify_sources,
    load_rules,
    parse_rules,
)
from hifirag_core.evaluation.credibility_corpus import iter_medquad
from tests.support.credibility_helpers import medquad_path

CASES: dict[str, list[str]] = {
    "government": [
        # from the MedQuAD corpus
        "https://rarediseases.info.nih.gov/gard/335/abcd-syndrome",
        "https://ghr.nlm.nih.gov/condition/acatalasemia",
        "https://www.nlm.nih.gov/medlineplus/abscess.html",
        "http://www.niddk.nih.gov/health-information/health-topics/endocrine/graves-disease/Pages/fact-sheet.aspx",
        "http://www.ninds.nih.gov/disorders/landaukleffnersyndrome/landaukleffnersyndrome.htm",
        "http://nihseniorhealth.gov/alzheimersdisease/toc.html",
        "http://www.nhlbi.nih.gov/health/health-topics/topics/angina",
        "http://www.cdc.gov/parasites/taeniasis/",
        "https://www.cancer.gov/types/leukemia/patient/adult-all-treatment-pdq",
        # elsewhere
        "https://medlineplus.gov/ency/article/000131.htm",
        "https://www.fda.gov/drugs/drug-safety-and-availability/drug-safety-communications",
        "https://www.nhs.uk/conditions/asthma/",
        "https://www.gov.uk/government/publications/green-book-the-complete-current-edition",
        "https://www.canada.ca/en/public-health/services/diseases/measles.html",
        "https://www.ecdc.europa.eu/en/measles",
        "https://health.mil/Military-Health-Topics/Combat-Support",
        "https://www.ncbi.nlm.nih.gov/books/NBK1116/",
        "https://blogs.cdc.gov/publichealthmatters/2019/04/measles/",  # an agency's blog is the agency's
        "https://www.health.gov.au/topics/immunisation",
    ],
    "peer_reviewed": [
        "https://www.nejm.org/doi/full/10.1056/NEJMoa2034577",
        "https://www.thelancet.com/journals/lancet/article/PIIS0140-6736(20)32661-1/fulltext",
        "https://pubmed.ncbi.nlm.nih.gov/33301246/",
        "https://www.ncbi.nlm.nih.gov/pmc/articles/PMC7745181/",
        "https://pmc.ncbi.nlm.nih.gov/articles/PMC7745181/",
        "https://www.ncbi.nlm.nih.gov/pubmed/33301246",
        "https://www.bmj.com/content/372/bmj.n597",
        "https://jamanetwork.com/journals/jama/fullarticle/2778234",
        "https://www.nature.com/articles/s41586-020-2798-3",
        "https://academic.oup.com/cid/article/73/11/e4166/6102586",
        "https://journals.plos.org/plosmedicine/article?id=10.1371/journal.pmed.0020124",
        "https://www.cochranelibrary.com/cdsr/doi/10.1002/14651858.CD001269.pub6/full",
    ],
    "established_news": [
        "https://www.nytimes.com/2021/01/05/health/covid-vaccine-side-effects.html",
        "https://www.bbc.co.uk/news/health-55045639",
        "https://www.reuters.com/business/healthcare-pharmaceuticals/",
        "https://apnews.com/article/health-ap-top-news-measles",
        "https://www.theguardian.com/society/2023/jan/10/nhs-waiting-lists",
        "https://www.statnews.com/2023/01/01/fda-approval/",
        "https://www.npr.org/sections/health-shots/2022/07/12/1110933335/monkeypox",
    ],
    "organization_report": [
        "https://www.who.int/news-room/fact-sheets/detail/asthma",
        "https://www.mayoclinic.org/diseases-conditions/asthma/symptoms-causes/syc-20369653",
        "https://my.clevelandclinic.org/health/diseases/6424-asthma",
        "https://www.hopkinsmedicine.org/health/conditions-and-diseases/asthma",
        "https://www.cancer.org/cancer/types/breast-cancer.html",
        "https://www.health.harvard.edu/diseases-and-conditions/asthma",
        "https://www.kff.org/health-costs/report/employer-health-benefits-survey/",
    ],
    "user_generated": [
        "https://www.reddit.com/r/AskDocs/comments/abc123/is_this_rash_serious/",
        "https://old.reddit.com/r/medicine/comments/xyz789/new_guidelines/",
        "https://www.quora.com/Is-ibuprofen-safe-during-pregnancy",
        "https://medicalsciences.stackexchange.com/questions/1234/why-do-vaccines-need-boosters",
        "https://stackoverflow.com/questions/231767/what-does-the-yield-keyword-do",
        "https://patient.info/forums/discuss/asthma-inhaler-question-12345",
        "https://connect.mayoclinic.org/discussion/living-with-asthma/",
        "https://healthunlocked.com/asthmalunguk/posts/123/inhaler",
        "https://en.wikipedia.org/wiki/Asthma",
        "https://forums.example-health.net/t/asthma/55",  # forum.* host prefix
        "https://www.someclinic.com/community/asthma-support",  # generic /community/ path
    ],
    "blog": [
        "https://medium.com/@someone/what-i-learned-about-asthma-1a2b3c4d5e6f",
        "https://drjane.substack.com/p/the-truth-about-inhalers",
        "https://healthnotes.wordpress.com/2020/01/05/asthma-basics/",
        "https://familyhealth.blogspot.com/2019/05/asthma.html",
        "https://www.example-pharmacy.com/blog/2020/asthma-tips",
        "https://blog.example-startup.io/asthma-app-launch",
    ],
    "ai_generated": [
        "https://chatgpt.com/share/67a1b2c3-0d4e-8000-a1b2-c3d4e5f6a7b8",
        "https://chat.openai.com/share/1b2c3d4e-5f6a-7b8c-9d0e-f1a2b3c4d5e6",
        "https://gemini.google.com/share/1a2b3c4d5e6f",
        "https://g.co/gemini/share/1a2b3c4d5e6f",
        "https://claude.ai/share/0a1b2c3d-4e5f-6789-abcd-ef0123456789",
        "https://www.perplexity.ai/search/is-ibuprofen-safe-abc123",
        "https://poe.com/s/AbCdEf123456",
    ],
    "unknown": [
        "https://www.example.com/asthma",
        "https://patient.info/health/asthma-leaflet",  # only patient.info's forums are listed
        "https://chatgpt.com/",  # the assistant's home page, not a shared answer
        "https://www.nih.gov.example.com/fake",  # a look-alike host, not under nih.gov
        "https://fakenejm.org/article",  # not a subdomain of nejm.org
        "",
        "not a url at all",
    ],
}


@pytest.mark.parametrize(("expected", "url"), [(t, u) for t, urls in CASES.items() for u in urls])
def test_real_urls_get_their_source_type(expected: str, url: str) -> None:
    assert classify_source(url) == expected


def test_every_source_type_is_exercised() -> None:
    assert set(CASES) == set(SOURCE_TYPES)


def test_scheme_less_urls_ports_and_case_are_tolerated() -> None:
    assert classify_source("www.CDC.gov/flu/") == "government"
    assert classify_source("https://WWW.NEJM.ORG:443/doi/full/x") == "peer_reviewed"
    assert classify_source("//reddit.com/r/Health/comments/a/b/") == "user_generated"


def test_explicit_metadata_wins_over_the_url() -> None:
    url = "https://www.reddit.com/r/AskDocs/comments/abc123/x/"
    assert classify_source(url, "peer_reviewed") == "peer_reviewed"
    assert classify_sources([url, url], [None, "government"]) == ["user_generated", "government"]


def test_explicit_metadata_must_be_a_known_type() -> None:
    with pytest.raises(SourceRulesError, match="not a source type"):
        classify_source("https://x.org", "journal")


def test_corpus_level_host_override() -> None:
    rules = load_rules().with_hosts({"towardsdatascience.com": "blog", "www.example.com": "organization_report"})
    assert rules.classify("https://towardsdatascience.com/some-post-123") == "blog"
    assert rules.classify("https://www.example.com/asthma") == "organization_report"
    assert load_rules().classify("https://www.example.com/asthma") == "unknown"  # the default is untouched


def test_longest_listed_domain_wins() -> None:
    rules = parse_rules({"hosts": {"government": ["nih.gov"], "peer_reviewed": ["pubmed.ncbi.nlm.nih.gov"]}})
    assert rules.classify("https://pubmed.ncbi.nlm.nih.gov/1/") == "peer_reviewed"
    assert rules.classify("https://www.ninds.nih.gov/x") == "government"


def test_rules_file_with_a_bad_type_is_rejected(tmp_path: Path) -> None:
    bad = tmp_path / "rules.toml"
    bad.write_text('[hosts]\njournal = ["nejm.org"]\n')
    with pytest.raises(SourceRulesError, match="journal"):
        load_rules(bad)
    bad.write_text('[[path_rules]]\npattern = "("\ntype = "blog"\n')
    with pytest.raises(SourceRulesError, match="bad pattern"):
        load_rules(bad)


def test_lengths_must_match() -> None:
    with pytest.raises(ValueError, match="2 URLs but 1"):
        classify_sources(["a", "b"], [None])


def test_every_medquad_url_is_government_by_the_rules_alone() -> None:
    rows = list(iter_medquad(medquad_path()))
    types = {row["url"]: classify_source(row["url"]) for row in rows}
    assert len(rows) == 5486
    assert {t for t in types.values()} == {"government"}
