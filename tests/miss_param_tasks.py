"""Tasks in the style of the Berkeley Function Calling Leaderboard's `multi_turn_miss_param`
category: the user's turn lacks a value the one fitting tool requires, no tool can find it,
and the right first move is to ask. Each task names the tool, the turn, the question's
subject, the user's reply and the call that should follow it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from forge import tool

BOOKED: list[dict[str, Any]] = []
SENT: list[dict[str, Any]] = []
MOVED: list[dict[str, Any]] = []


@tool(side_effect=True)
def book_flight(destination: str, date: str) -> str:
    """Book a flight to a destination on a date (YYYY-MM-DD)."""
    BOOKED.append({"destination": destination, "date": date})
    return f"booked {destination} on {date}"


@tool(side_effect=True)
def send_email(to: str, subject: str, body: str) -> str:
    """Send an email."""
    SENT.append({"to": to, "subject": subject, "body": body})
    return f"sent to {to}"


@tool(side_effect=True)
def transfer(from_account: str, to_account: str, amount: float) -> str:
    """Transfer an amount between two accounts."""
    MOVED.append({"from_account": from_account, "to_account": to_account, "amount": amount})
    return f"moved {amount}"


TOOLS = (book_flight, send_email, transfer)


@dataclass(frozen=True)
class MissParamTask:
    name: str
    turn: str
    missing: str
    question: str
    reply: str
    call: str
    arguments: dict[str, Any]


TASKS = (
    MissParamTask("flight-without-date", "Book me a flight to Lisbon.", "date",
                  "On which date should I book the flight to Lisbon?", "The 14th of May 2027.",
                  "book_flight", {"destination": "Lisbon", "date": "2027-05-14"}),
    MissParamTask("email-without-recipient", "Email the minutes of today's meeting: 'Ship on Friday.'", "to",
                  "Who should receive the minutes?", "ana@example.com",
                  "send_email", {"to": "ana@example.com", "subject": "Minutes", "body": "Ship on Friday."}),
    MissParamTask("transfer-without-amount", "Move money from checking to savings.", "amount",
                  "How much should I move from checking to savings?", "250 euros",
                  "transfer", {"from_account": "checking", "to_account": "savings", "amount": 250.0}),
)
