"""`records.record` behaves as `dataclasses.dataclass` with the same options: the records every
stage defines switched to it to start faster (tests/test_startup.py), and nothing that reads,
compares, hashes, sorts, copies or pickles them may tell the difference."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from dataclasses import field

import pytest

from kubelint_ports import records
from kubelint_ports.findings import Report
from kubelint_ports.records import record
from kubelint_ports.vocabulary import Location

OPTIONS = [dict(eq=eq, order=order, frozen=frozen, slots=slots)
           for eq in (True, False) for order in (False, True) for frozen in (False, True) for slots in (False, True)
           if eq or not order]


def pair(options):
    """The same class body made by dataclass and by record."""
    made = []
    for decorate in (dataclasses.dataclass(**options), record(**options)):
        @decorate
        class Port:
            name: str
            number: int = 80
            labels: list = field(default_factory=list)
            note: str = field(default="", compare=False)
            secret: str = field(default="x", repr=False)
            hashed_only: int = field(default=0, hash=False)
            seen: int = field(default=0, init=False, repr=False)

        made.append(Port)
    return made


# Module level, so that pickle finds them by name.
@dataclasses.dataclass(frozen=True, slots=True, order=True)
class PickledByDataclass:
    path: str
    line: int = 0


@record(frozen=True, slots=True, order=True)
class PickledByRecord:
    path: str
    line: int = 0


ARGUMENTS = [("a",), ("a", 81), ("b", 80, [1]), ("a", 80, [], "noted"), ("a", 80, [], "", "y", 3)]


@pytest.fixture(params=["generic", "compiled"])
def init_kind(request, monkeypatch):
    """A record's first instances go through the generic `__init__`, later ones through the
    compiled one (`records.COMPILE_AFTER`): each test runs with both."""
    if request.param == "compiled":
        monkeypatch.setattr(records, "COMPILE_AFTER", 0)
    return request.param


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(k for k, v in o.items() if v) or "plain")
def test_a_record_is_the_dataclass_it_replaces(options, init_kind):
    standard, cheap = pair(options)
    olds, news = [standard(*args) for args in ARGUMENTS], [cheap(*args) for args in ARGUMENTS]
    for old, new in zip(olds, news):
        assert repr(new) == repr(old).replace(standard.__qualname__, cheap.__qualname__)
        assert dataclasses.asdict(new) == dataclasses.asdict(old)
        assert [f.name for f in dataclasses.fields(new)] == [f.name for f in dataclasses.fields(old)]
        assert dataclasses.is_dataclass(new) and new.__match_args__ == old.__match_args__
        assert dataclasses.asdict(dataclasses.replace(new, number=9)) == dataclasses.asdict(
            dataclasses.replace(old, number=9))
        assert dataclasses.asdict(copy.copy(new)) == dataclasses.asdict(old)
        assert dataclasses.asdict(copy.deepcopy(new)) == dataclasses.asdict(old)
        assert (new == "a") == (old == "a") and (new != new) == (old != old)
    for (old_a, new_a) in zip(olds, news):
        for (old_b, new_b) in zip(olds, news):
            assert (new_a == new_b) == (old_a == old_b)
            if options["order"]:
                assert [new_a < new_b, new_a <= new_b, new_a > new_b, new_a >= new_b] == \
                       [old_a < old_b, old_a <= old_b, old_a > old_b, old_a >= old_b]
    assert (cheap.__hash__ is None) == (standard.__hash__ is None)
    if options["eq"] and options["frozen"]:  # hashed by value: the same hash, or the same refusal (a list)
        assert [hash_or_error(r) for r in news] == [hash_or_error(r) for r in olds]
        hashable = [cheap(*args, labels=()) for args in ARGUMENTS[:2]]
        assert [hash(r) for r in hashable] == [hash(standard(*args, labels=())) for args in ARGUMENTS[:2]]
    if options["frozen"]:
        with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'number'"):
            news[0].number = 1
        with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field 'number'"):
            del news[0].number
    else:
        news[0].number = 1
        assert news[0].number == 1
    assert news[0].seen == 0 and news[0].labels is not news[1].labels  # init=False default, fresh factories
    assert cheap(number=5, name="k", note="n").note == "n"
    for args, kwargs in (((), {}), (("a", 1, [], "", "", 0, "one too many"), {}), (("a",), {"seen": 1}),
                         (("a",), {"name": "b"}), (("a",), {"bogus": 1})):
        with pytest.raises(TypeError) as refused:
            cheap(*args, **kwargs)
        with pytest.raises(TypeError) as expected:
            standard(*args, **kwargs)
        assert str(refused.value).split("() ")[-1] == str(expected.value).split("() ")[-1]  # Python's own words


def test_the_generic_init_gives_way_to_the_compiled_one():
    @record(frozen=True, slots=True)
    class Pair:
        low: int
        high: list = field(default_factory=list)

    generic = Pair.__init__
    made = [Pair(number) for number in range(records.COMPILE_AFTER + 1)]
    assert Pair.__init__ is not generic and [p.low for p in made] == list(range(records.COMPILE_AFTER + 1))
    assert Pair(3) == Pair(3, []) and Pair(4).high is not Pair(4).high


def hash_or_error(value):
    try:
        return hash(value)
    except TypeError as error:
        return str(error)


def test_records_pickle_and_sort_as_dataclasses(init_kind):
    values = [("b", 2), ("a", 3), ("a", 1)]
    olds = [PickledByDataclass(*v) for v in values]
    news = [PickledByRecord(*v) for v in values]
    assert [(r.path, r.line) for r in sorted(news)] == [(r.path, r.line) for r in sorted(olds)]
    for new in news:
        assert pickle.loads(pickle.dumps(new)) == new
        assert {new: 1}[PickledByRecord(new.path, new.line)] == 1
    assert pickle.loads(pickle.dumps(Location("a.yaml", 1, 2, message="m"))).message == "m"
    report = pickle.loads(pickle.dumps(Report([], [], (), files=2)))
    assert report.files == 2 and report.port_map is None


def test_post_init_runs_and_field_order_is_checked_when_the_class_is_made(init_kind):
    @record(frozen=True, slots=True)
    class Pair:
        low: int
        high: int = 0

        def __post_init__(self):
            if self.high and self.high < self.low:
                raise ValueError("high below low")

    assert Pair(1, 2).high == 2
    with pytest.raises(ValueError):
        Pair(3, 2)
    with pytest.raises(TypeError, match="non-default argument 'high' follows default argument"):
        @record
        class Wrong:
            low: int = 0
            high: int


def test_what_the_class_body_defines_wins():
    @record(frozen=True)
    class Named:
        name: str

        def __repr__(self) -> str:
            return f"<{self.name}>"

        def __hash__(self) -> int:
            return 7

    assert repr(Named("a")) == "<a>" and hash(Named("a")) == 7
    with pytest.raises(TypeError):
        @record(order=True)
        class Ordered:
            name: str

            def __lt__(self, other):
                return False
