"""The vocabulary of what personal facts are about, in the languages recall analyses.

``domain.gist`` reads a fact with it: who the fact is about (a relative, a friend, a pet, or
the user), which attribute it sets (its *concept*: where the user lives, their job, car,
dentist ...) and which words are only noise around the value ("now", "switched to",
"correction"). Two facts with the same concept for the same person are about the same thing
even when they share no word ("lives in Leeds" / "moved to Glasgow").

A cue is space-separated slots, each slot ``a|b|c`` (any of these words) where a trailing
``*`` matches by prefix; Chinese and Japanese cues match as substrings. A concept is
single-valued (a new value replaces the old) unless ``multi``: a user speaks several languages
and has several allergies, so those facts never replace each other. ``place``: the value is a
place, so a cue followed by a weekday or a month ("the class moved to Thursday") is not it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Concept:
    name: str
    cues: tuple[str, ...]  # Latin-script cues (slots of alternatives)
    cjk: tuple[str, ...] = ()  # Chinese and Japanese substrings
    multi: bool = False  # several values can be true at once
    place: bool = False  # the value must look like a place
    person: bool = False  # the value must name someone ("Dr. Hale", "Snip & Co")
    value_cue: bool = False  # the cue is the value itself ("vegetarian" → "vegan")


def _c(
    name: str,
    latin: str,
    cjk: str = "",
    *,
    multi: bool = False,
    place: bool = False,
    person: bool = False,
    value_cue: bool = False,
) -> Concept:
    cues = tuple(c.strip() for c in latin.split(",") if c.strip())
    return Concept(name, cues, tuple(cjk.split()), multi, place, person, value_cue)


# In order of precedence: a longer, more specific cue is listed before the words it contains
# ("phone number" before "phone").
CONCEPTS: tuple[Concept, ...] = (
    _c("phone number",
       "phone|mobile|cell|handy|telefon number|numbers|nummer, handynummer|telefonnummer|rufnummer, "
       "número de móvil|teléfono|celular, número, numéro de téléphone|portable, numéro",
       "電話番号 携帯番号 番号 电话号码 手机号"),
    _c("email", "email|e-mail|emails|mailadresse|correo|courriel|mail", "メール メールアドレス 邮箱 电子邮件"),
    _c("address", "address|adresse|anschrift|dirección|domicilio|postcode", "住所 地址"),
    _c("mobile plan", "mobile|phone plan|contract|provider|tariff, mobilfunk*|handyvertrag, tarifa|operador|opérateur|forfait"),
    _c("residence",
       "live|lives|lived|living|reside|resides in|at|near, moved|move|moving|relocated|relocating|relocate to|back, "
       "moved|move|moving out, rent|rents|renting|rented a|an|the flat|apartment|room|studio, "
       "based in, home|hometown is, wohne|wohnt|wohnen|wohnte|lebe|lebt|leben in|im|bei|am, gezogen|umgezogen|zieht|ziehe, "
       "wohnort, vivo|vive|viven|vivimos|vivía|resido|reside en, mudó|mudé|mudado|mudamos|mudaron|trasladó|trasladé, "
       "habite|habites|habitent|habitons|vit|vis|vivent|vivons à|en|au|près, déménagé|déménage|déménager|emménagé|installé|installée, "
       "vivo|vive|vivono|abito|abita|abitano a|in, trasferito|trasferita|trasferiti|trasferisce, "
       "moro|mora|moram|vivo|vive em|no|na, mudou|mudei|mudaram, woon|woont|wonen in, verhuisd|verhuist",
       "住んで 住む 住み 住ま 引っ越 在住 転居 住在 搬到 搬家 居住", place=True),
    # Moving house names the attribute without a place ("has moved house: home is now a terrace in ...").
    _c("residence", "moved|move|moving|moves house|home|flat|flats"),
    _c("job",
       "work|works|worked|working as|at|for|in, job|jobs|employer|occupation|profession|career, employed|hired, joined, "
       "freelance|freelancer|freelances|freelancing|freelanced|self-employed, "
       "arbeite|arbeitet|arbeiten|arbeitete als|bei|für|im, beruf|job|arbeitgeber|stelle, angestellt|tätig, "
       "trabajo|trabaja|trabajan|trabajaba como|en|para, empleo|puesto|profesión|oficio, "
       "travaille|travailles|travaillent|travaillé comme|chez|à|pour, emploi|poste|métier|profession|boulot, "
       "lavoro|lavora|lavorano come|presso|da|per|in, impiego|mestiere|professione, "
       "trabalho|trabalha como|na|no|em|para, werk|werkt als|bij|voor, baan|beroep",
       "働いて 働く 勤め 勤務 仕事 職業 就職 転職 工作 上班 职业"),
    _c("partner",
       "girlfriend|boyfriend|partner|wife|husband|fiancé|fiancée|fiance|fiancee|spouse, dating, married|engaged to, "
       "broke up, freundin|freund|partnerin|ehefrau|ehemann|verlobte|verlobter, zusammen, verheiratet, "
       "novia|novio|pareja|esposa|esposo|marido, saliendo con, copine|copain|compagne|compagnon|épouse|époux|mari, "
       "en couple, mein|meinem|meinen|dein|sein mann, meine|meiner|deine|seine frau, mi|su mujer, ma|sa femme, "
       "marito|moglie, marido|mulher",
       "彼女 彼氏 恋人 付き合 結婚 女朋友 男朋友 老婆 老公"),
    _c("manager", "manager|boss|supervisor, reports|report to, chef|chefin|vorgesetzte*|teamleiter*, jefe|jefa|gerente, responsable|patron|patronne",
       "上司 部長 課長 老板 经理", person=True),
    _c("dentist", "dentist|dental|zahnarzt*|zahnärzt*|dentista|dentiste", "歯医者 歯科 牙医", person=True),
    _c("doctor", "doctor|gp|physician|hausarzt*|hausärzt*|arzt|ärztin|médico|médica|médecin|generalista", "医者 主治医 医生", person=True),
    _c("therapist", "therapist|counsellor|counselor|psychologist|therapy|therapeut*|psycholog*|terapeuta|psicólog*|thérapeute|psy|psychologue", "カウンセラー 心理", person=True),
    _c("physio", "physio|physiotherapist|physiotherapeut*|fisio|fisioterapeuta|kiné|kinésithérapeute|kine", "理学療法", person=True),
    _c("vet", "vet|vets|veterinarian|vet's|tierarzt*|tierärzt*|veterinari*|vétérinaire|véto", "獣医 兽医", person=True),
    _c("hairdresser", "hairdresser|barber|haircut|hair|friseur*|friseuse|peluquer*|coiffeur|coiffeuse", "美容院 美容室 床屋 理发", person=True),
    _c("landlord", "landlord|landlady|vermieter*|casero|casera|arrendador|propriétaire|proprio", "大家 房东", person=True),
    _c("school", "school|attends|nursery|kindergarten|schule|kita|colegio|escuela|instituto|école|collège|lycée", "学校 小学 中学 高校 幼稚園 学校"),
    _c("birthday", "cumple|cumplo|cumplen años, birthday|born, geburtstag|geboren, cumpleaños|cumple|nació|nacido, anniversaire|né|née, compleanno|nato|nata, aniversário|verjaardag|jarig", "誕生日 生日"),
    _c("diet", "vegetarian|vegan|pescatarian|diet|keto|omnivore, vegetarier*|veganer*|vegetarisch|ernährung, vegetarian*|vegan*|dieta, végétarien*|végan*|régime",
       "ベジタリアン ヴィーガン 菜食 素食", value_cue=True),
    _c("bank", "bank|banks with|at, bank, account|accounts with|at, current|checking|savings account, konto|girokonto, bank, "
       "banco|cuenta, banque|compte, banca|conto", "銀行 口座 银行"),
    _c("car", "drive|drives|driving|drove, car|cars|vehicle, fahre|fährt|fahren, auto|wagen|dienstwagen|fahrzeug, conduce|conduzco|maneja|manejo, coche|carro, conduit|conduis, voiture, guida|guido, macchina, rijdt|rijd",
       "車 運転 汽车 开车"),
    _c("phone", "phone|smartphone|iphone|pixel|galaxy|android|fairphone, handy, móvil|celular|teléfono, téléphone|portable",
       "スマホ 携帯 手机"),
    _c("laptop", "laptop|notebook|macbook|thinkpad|chromebook|portátil|ordinateur", "パソコン 电脑"),
    _c("commute", "commute|commutes|commuting, cycle|cycles|bike|bikes|walk|walks|drive|drives|train|bus|tube|metro|tram to work, pendle|pendelt", "通勤"),
    # What someone or something is called ("my cat is called Pickle"): set when naming is all a fact does.
    _c("name", ""),
    # Several values are true at once: these facts are never updates of each other.
    _c("allergy", "allergic|allergy|allergies|allergisch|allergie|alérgic*|alergia|allergique|allergico|allergica|allergia", "アレルギー 过敏", multi=True),
    _c("language", "speak|speaks|spoke|fluent, spricht|spreche|sprechen, habla|hablo|hablan, parle|parles|parlent", "話せ 話す 说", multi=True),
    _c("liking", "like|likes|love|loves|enjoy|enjoys|prefer|prefers|fan|support|supports|follow|follows, mag|mögen|liebt|liebe, gusta|encanta|prefiere, aime|adore|préfère, piace|ama|preferisce, gosta|adora",
       "好き 喜欢", multi=True),
    _c("playing", "play|plays|playing, spielt|spiele|spielen, juega|juego|juegan|toca|toco, joue|joues|jouent, gioca|gioco|suona, joga|toca, speelt", "弾い 弾く 打つ 踢 打", multi=True),
    _c("learning", "learning|learns|studying|studies, lernt|lerne, aprendiendo|aprende|estudia, apprend*, impara|studia, aprende|estuda", "習って 学ん 学习 在学", multi=True),
)  # fmt: skip

# Who a fact can be about besides the user: a relative, a friend or a pet named with a
# possessive ("Nora's sister", "mein Sohn", "la hermana de Lucía", "健二の娘"). Canonical form
# first; partners are a concept, not a subject (the partner *is* the value that changes).
RELATIONS: dict[str, tuple[str, ...]] = {
    "son": ("son", "sons", "sohn", "söhne", "hijo", "hijos", "fils", "息子"),
    "daughter": ("daughter", "daughters", "tochter", "töchter", "hija", "hijas", "fille", "filles", "娘", "女儿"),
    "child": ("child", "children", "kid", "kids", "kind", "kinder", "niño", "niña", "niños", "enfant", "enfants", "子供", "孩子"),
    "sister": ("sister", "sisters", "schwester", "schwestern", "hermana", "hermanas", "sœur", "soeur", "sœurs", "姉", "妹", "姐姐", "妹妹"),
    "brother": ("brother", "brothers", "bruder", "brüder", "hermano", "hermanos", "frère", "frères", "兄", "弟", "哥哥", "弟弟"),
    "mother": ("mother", "mum", "mom", "mama", "mutter", "madre", "mamá", "mère", "maman", "母", "母親", "妈妈"),
    "father": ("father", "dad", "papa", "vater", "padre", "papá", "père", "父", "父親", "爸爸"),
    "parents": ("parents", "eltern", "padres", "両親", "父母"),
    "grandparent": ("grandmother", "grandma", "granny", "nan", "grandfather", "grandpa", "oma", "opa", "abuela", "abuelo",
                    "grand-mère", "grand-père", "mamie", "papi", "祖母", "祖父"),
    "aunt": ("aunt", "auntie", "tante", "tía", "叔母", "伯母"),
    "uncle": ("uncle", "onkel", "tío", "oncle", "叔父", "伯父"),
    "cousin": ("cousin", "cousins", "cousine", "primo", "prima", "いとこ"),
    "nephew": ("nephew", "nephews", "neffe", "neffen", "sobrino", "sobrinos", "neveu", "neveux", "甥"),
    "niece": ("niece", "nieces", "nichte", "sobrina", "nièce", "姪"),
    "friend": ("friend", "friends", "kumpel", "amigo", "amiga", "amigos", "ami", "amie", "amis", "友達", "友人", "朋友"),
    "colleague": ("colleague", "coworker", "kollege", "kollegin", "colega", "collègue", "同僚", "同事"),
    "neighbour": ("neighbour", "neighbor", "nachbar", "nachbarin", "vecino", "vecina", "voisin", "voisine", "隣人", "邻居"),
    "dog": ("dog", "dogs", "puppy", "hund", "perro", "perra", "chien", "chienne", "犬", "狗"),
    "cat": ("cat", "cats", "kitten", "katze", "kater", "gato", "gata", "chat", "chatte", "猫"),
    "pet": ("pet", "pets", "haustier", "mascota", "animal", "宠物", "ペット"),
}  # fmt: skip
RELATION_OF: dict[str, str] = {form: name for name, forms in RELATIONS.items() for form in forms}

# Possessives that make the next relation noun someone's ("my sister", "meine Schwester").
POSSESSIVES = frozenset(
    "my his her our their your mein meine meinem meinen meiner sein seine seinem seinen ihr ihre "
    "ihrem ihren unser unsere mi mis su sus nuestra nuestro nuestras nuestros mon ma mes son sa ses "
    "notre nos leur leurs".split()
)

# Words around a value that say it changed, or that it is said again: never part of the value.
CHANGE_WORDS = frozenset(
    """
    now new newly currently current these days anymore longer instead since recently lately just
    switched switch changed change moved replaced upgraded updated update started start got became
    sold cancelled canceled cancel quit left stopped ended dropped gave given correction actually
    correct corrected fact wrong mistake earlier still again also too
    usual usually always often today yesterday ago last next month week year
    jetzt neu neue neuer neuen neues aktuell inzwischen mittlerweile seit gewechselt wechselt
    korrektur eigentlich tatsächlich falsch immer noch schon wieder
    ahora nuevo nueva actual actualmente ya cambió cambiado corrección realidad siempre todavía
    maintenant nouveau nouvelle nouvel actuel actuellement désormais changé correction fait
    toujours encore déjà
    """.split()
)

# Verbs and nouns that carry no attribute of their own ("has a class", "goes to"): two facts
# sharing only these are not about the same thing.
LIGHT_WORDS = frozenset(
    """
    be is are was were been am has have had having get gets got go goes going went gone do does
    did doing done make makes made take takes took use uses used see sees saw want wants need
    needs keep keeps put called named name thing things way place people lot bit kind sort type
    class classes lesson lessons session sessions course time times day days week weeks month
    months year years morning mornings evening evenings afternoon afternoons night nights weekend
    weekends favourite favorite main own every each most really very much many one two home
    work works worked working run runs running
    drink drinks drank drinking eat eats ate eating cup cups glass mug
    ist sind war hat haben hatte wird geht gehe macht mache nimmt nutzt benutzt verwendet heißt
    heisst genannt trinkt trinke isst esse tasse glas
    es son está están era tiene tienen tenía va voy hace hago usa utiliza llama llamado bebe bebo
    toma tomo taza vaso
    est sont était a ont avait va vais fait fais utilise appelle appelé boit bois boivent prend
    prends prennent mange manges verre
    """.split()
)

# Titles before a name ("Dr. Hale"): not part of the value.
TITLES = frozenset("dr mr mrs ms miss prof herr frau sr sra dña mme mlle m".split())

WEEKDAYS_AND_MONTHS = frozenset(
    """
    monday tuesday wednesday thursday friday saturday sunday mondays tuesdays wednesdays thursdays
    fridays saturdays sundays january february march april may june july august september october
    november december montag dienstag mittwoch donnerstag freitag samstag sonntag montags
    dienstags mittwochs donnerstags freitags samstags sonntags januar februar märz mai juni juli
    oktober dezember lunes martes miércoles jueves viernes sábado domingo enero febrero marzo
    abril mayo junio julio agosto septiembre octubre noviembre diciembre lundi mardi mercredi
    jeudi vendredi samedi dimanche janvier février mars avril juin juillet août septembre
    octobre novembre décembre
    """.split()
)

# Words that deny what follows ("not 12 March"): kept, a fact and its negation differ.
NEGATIONS = frozenset("not no never nicht kein keine keinen nie nunca jamás jamais pas non".split())

# The user, as naive agents name them ("User lives in ...", "The user's car").
USER_WORDS = frozenset("user user's users customer client".split())
